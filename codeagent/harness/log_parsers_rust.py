"""Rust test logs: `cargo` (SWE-bench's parser of libtest's output) and `nextest` (cargo nextest).

`cargo` spells ids as SWE-bench does: the test's path in its crate, `tests::it_adds`, `integration_adds`
(an integration test file's test, without the file), from `test <id> ... ok` (PASSED) and
`test <id> ... FAILED`. Other results, and names with a space (doc tests `src/lib.rs - add (line 3)`,
`tests::x - should panic`), are not recorded there, as in SWE-bench.

`nextest` reads cargo nextest's human output (`PASS [   0.004s] fixture tests::it_adds`) and its
libtest-json output (`--message-format libtest-json`, one event per line); ids are the test's path
as in `cargo`, the binary the test is in dropped (`fixture::integration integration_adds` ->
`integration_adds`; libtest-json's `fixture::integration$integration_adds` likewise). PASS -> PASSED,
SKIP -> SKIPPED, FAIL / SIGSEGV / ABORT / TIMEOUT and every other failure -> FAILED; a retried
test's last attempt counts (`TRY 2 PASS`: a flaky test that passed).
"""

from __future__ import annotations

import re

from .log_parsers_base import FAILED, PASSED, Parser, Record, clean_lines, markers

_CARGO = re.compile(r"^test\s+(\S+)\s+\.\.\.\s+(\w+)$")
_CARGO_STATUS = {"ok": PASSED, "FAILED": FAILED}


def _parse_cargo(log: str, record: Record) -> None:
    for line in clean_lines(log):
        match = _CARGO.match(line)
        if match and match.group(2) in _CARGO_STATUS:
            record(match.group(1), _CARGO_STATUS[match.group(2)])


PARSERS: dict[str, Parser] = {"cargo": _parse_cargo}

_RUSTC = (r"^error\[E\d+\]: ", r"^error: could not compile", r"^\s*Compiling \S+ v\d")
MARKERS = {
    "cargo": markers(r"^running \d+ tests?$", r"^test result: ", *_RUSTC),
}
