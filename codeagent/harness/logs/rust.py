"""Rust test logs: `cargo` (SWE-bench's parser of libtest's output) and `nextest` (cargo nextest).

`cargo` spells ids as SWE-bench does: the test's path in its crate, `tests::it_adds`, `integration_adds`
(an integration test file's test, without the file), from `test <id> ... ok` (PASSED) and
`test <id> ... FAILED`. Other results, and names with a space (doc tests `src/lib.rs - add (line 3)`,
`tests::x - should panic`), are not recorded there, as in SWE-bench.

`nextest` reads cargo nextest's human output (`PASS [   0.004s] fixture tests::it_adds`) and its
libtest-json output (`--message-format libtest-json`, one event per line); ids are the test's path
as in `cargo`, the binary the test is in dropped (`fixture::integration integration_adds` ->
`integration_adds`; libtest-json's `fixture::integration$integration_adds` likewise). PASS -> PASSED,
SKIP -> SKIPPED, FAIL, TIMEOUT, ABORT, LEAK-FAIL and a signal (`SEGV`) -> FAILED; a retried test's
last attempt counts (`TRY 2 PASS`, `FLAKY 2/2`: a flaky test that passed; its failed try stays in
`conflicts`). Progress lines (`SLOW`, `START`) are not results.
"""

from __future__ import annotations

import re

from .base import FAILED, PASSED, SKIPPED, Parser, Record, clean_lines, json_objects, markers

_CARGO = re.compile(r"^test\s+(\S+)\s+\.\.\.\s+(\w+)$")
_CARGO_STATUS = {"ok": PASSED, "FAILED": FAILED}
# `PASS [   0.027s] (1/7) fixture tests::it_adds`, `TRY 2 FAIL [...] (───) ...`, `FLAKY 2/3 [...] ...`
_NEXTEST = re.compile(r"^(?:TRY \d+ )?([A-Z][A-Z0-9]*(?:-[A-Z]+)?)(?: \d+/\d+)?\s+\[[^\]]*\]\s+(?:\([^)]*\)\s+)?\S+\s+(\S.*)$")
_NEXTEST_STATUS = {"PASS": PASSED, "FLAKY": PASSED, "LEAK": PASSED, "SKIP": SKIPPED, "FAIL": FAILED,
                   "LEAK-FAIL": FAILED, "TIMEOUT": FAILED, "ABORT": FAILED}
# a test killed by a signal: nextest writes the signal's name without `SIG` (SEGV), or `SIG<n>`
_SIGNALS = frozenset("ABRT BUS FPE HUP ILL INT KILL PIPE QUIT SEGV SYS TERM TRAP USR1 USR2 XCPU XFSZ".split())
_LIBTEST_STATUS = {"ok": PASSED, "failed": FAILED, "ignored": SKIPPED, "timeout": FAILED}


def _parse_cargo(log: str, record: Record) -> None:
    for line in clean_lines(log):
        match = _CARGO.match(line)
        if match and match.group(2) in _CARGO_STATUS:
            record(match.group(1), _CARGO_STATUS[match.group(2)])


def _nextest_status(word: str) -> str | None:
    return FAILED if word in _SIGNALS or word.startswith("SIG") else _NEXTEST_STATUS.get(word)


def _parse_nextest(log: str, record: Record) -> None:
    for event in json_objects(log, required="type"):  # libtest-json: `{"type":"test","event":"ok",...}`
        name, status = event.get("name"), _LIBTEST_STATUS.get(event.get("event"))  # type: ignore[arg-type]
        if event.get("type") == "test" and isinstance(name, str) and status:
            record(name.split("$", 1)[-1], status)  # `<crate>::<binary>$<test>`
    for line in clean_lines(log):
        match = _NEXTEST.match(line)
        status = _nextest_status(match.group(1)) if match else None
        if match and status:
            record(match.group(2), status)


PARSERS: dict[str, Parser] = {"cargo": _parse_cargo, "nextest": _parse_nextest}

_RUSTC = (r"^error\[E\d+\]: ", r"^error: could not compile", r"^\s*Compiling \S+ v\d")
MARKERS = {
    "cargo": markers(r"^running \d+ tests?$", r"^test result: ", *_RUSTC),
    "nextest": markers(r"^\s*Starting \d+ tests? across", r"^\s*Summary \[", r'^\{"type":"(?:suite|test)"',
                       r"^error: test run failed", *_RUSTC),
}
