"""Go test logs: `gotest` (SWE-bench's parser of `go test -v`) and `go_json` (`go test -json`).

Both spell a test as Go names it, without its package: `TestAdd`, a subtest `TestTable/one_plus_one`
(Go writes a subtest name's spaces as `_`). A test name in several packages is one id; its last
report counts. A package that fails to build (`# pkg` compile errors, `FAIL pkg [build failed]`)
reports no test, so its tests are missing from the map (they count as failed), never passed; so
are the tests a panic kept from running.
"""

from __future__ import annotations

import re

from .base import FAILED, PASSED, SKIPPED, Parser, Record, clean_lines, json_objects, markers

_RESULT = re.compile(r"^--- (PASS|FAIL|SKIP): (.+) \((.+)\)$")  # `--- PASS: TestX (0.00s)`, any depth
_VERBOSE_STATUS = {"PASS": PASSED, "FAIL": FAILED, "SKIP": SKIPPED}
_JSON_STATUS = {"pass": PASSED, "fail": FAILED, "skip": SKIPPED}


def _parse_gotest(log: str, record: Record) -> None:
    for line in clean_lines(log):
        match = _RESULT.match(line)
        if match:
            record(match.group(2), _VERBOSE_STATUS[match.group(1)])


def _parse_go_json(log: str, record: Record) -> None:
    # test2json's events; a package's own events (no "Test") and build events are not tests
    for event in json_objects(log, required="Action"):
        test, status = event.get("Test"), _JSON_STATUS.get(event.get("Action"))  # type: ignore[arg-type]
        if isinstance(test, str) and status:
            record(test, status)


PARSERS: dict[str, Parser] = {"gotest": _parse_gotest, "go_json": _parse_go_json}

_BUILD = (r"^FAIL\s+\S+ \[(?:build|setup) failed\]", r"^# \S+")
MARKERS = {
    "gotest": markers(r"^\s*(?:=== RUN|--- (?:PASS|FAIL|SKIP):)", r"^(?:ok|FAIL|\?)\s+\S+\s", r"^(?:PASS|FAIL)$",
                      *_BUILD),
    "go_json": markers(r'^\{"(?:Time|Action|ImportPath)":', *_BUILD),
}
