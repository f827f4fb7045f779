"""C and C++ test logs.

SWE-bench's parsers, spelling ids as they do:
- `googletest`: `[       OK ] Suite.Test (0 ms)` / `[  FAILED  ] ...`: what stands between the mark and the
  last ` (`; a parameterised failure keeps its parameter (`Small/Param.NonNegative/2, where GetParam() = -1`).
- `redis` (redis, valkey): `[ok]: <name> (1 ms)`, `[err]: <name> in <file>` (the file dropped),
  `[skip]` / `[ignore]` SKIPPED.
- `jq`: `PASS: <name>` / `FAIL: <name>` (automake's test driver).
- `micropython_test`: `pass <name>` / `FAIL <name>` / `skip <name>`.
- `doctest`: the first `<doctest>` XML report (`-r=xml`): `<TestCase> > <SubCase>` for each subcase,
  PASSED when every expression in it succeeded. Test cases without subcases are not recorded.

codeagent's `ctest`: ctest's own lines, `1/7 Test #1: add_ok ......   Passed    0.00 sec`, the test's
name as ctest knows it. Passed -> PASSED; Skipped and `Not Run (Disabled)` -> SKIPPED; `Not Run` (its
executable missing: the build failed) -> ERROR; anything else (Failed, Exception: SegFault, Timeout)
-> FAILED.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from .base import ERROR, FAILED, NATIVE_BUILD, PASSED, SKIPPED, Parser, Record, clean_lines, markers

_GOOGLETEST = re.compile(r"^.*\[\s*(OK|FAILED)\s*\]\s(.*)\s\(.*\)$")
_REDIS = re.compile(r"^\[(ok|err|skip|ignore)\]:\s(.+?)(?:\s\((\d+\s*m?s)\))?$")
_REDIS_FILE = re.compile(r"\s+in\s+\S+$")
_REDIS_STATUS = {"ok": PASSED, "err": FAILED, "skip": SKIPPED, "ignore": SKIPPED}
_JQ = re.compile(r"^\s*(PASS|FAIL):\s(.+)$")
_MICROPYTHON = re.compile(r"^(pass|FAIL|skip)\s+(.+)$")
_MICROPYTHON_STATUS = {"pass": PASSED, "FAIL": FAILED, "skip": SKIPPED}
_CTEST = re.compile(r"^\d+/\d+ Test +#\d+: (.+?) \.*\s*(\S.*?)\s+[\d.]+ sec$")


def _parse_googletest(log: str, record: Record) -> None:
    for line in clean_lines(log):
        match = _GOOGLETEST.match(line)
        if match:
            record(match.group(2), PASSED if match.group(1) == "OK" else FAILED)


def _parse_redis(log: str, record: Record) -> None:
    for line in clean_lines(log):
        match = _REDIS.match(line)
        if match:
            status, name = match.group(1), match.group(2)
            record(_REDIS_FILE.sub("", name) if status == "err" else name, _REDIS_STATUS[status])


def _parse_jq(log: str, record: Record) -> None:
    for line in clean_lines(log):
        match = _JQ.match(line)
        if match:
            record(match.group(2), PASSED if match.group(1) == "PASS" else FAILED)


def _parse_micropython(log: str, record: Record) -> None:
    for line in clean_lines(log):
        match = _MICROPYTHON.match(line)
        if match:
            record(match.group(2), _MICROPYTHON_STATUS[match.group(1)])


def _parse_doctest(log: str, record: Record) -> None:
    start = log.find("<doctest")
    end = log.find("</doctest>", start) if start >= 0 else -1
    if end < 0:
        return
    try:
        root = ET.fromstring(log[start:end + len("</doctest>")])
    except ET.ParseError:
        return
    for case in root.iter("TestCase"):
        for subcase in case.iter("SubCase"):
            passed = all(expression.get("success") == "true" for expression in subcase.iter("Expression"))
            record(f"{case.get('name')} > {subcase.get('name')}", PASSED if passed else FAILED)


def _ctest_status(result: str) -> str:
    result = result.lstrip("*")
    if result == "Passed":
        return PASSED
    if result.startswith("Skipped") or result.startswith("Not Run (Disabled)"):
        return SKIPPED
    return ERROR if result.startswith("Not Run") else FAILED


def _parse_ctest(log: str, record: Record) -> None:
    for line in clean_lines(log):
        match = _CTEST.match(line)
        if match:
            record(match.group(1), _ctest_status(match.group(2)))


PARSERS: dict[str, Parser] = {
    "googletest": _parse_googletest,
    "redis": _parse_redis,
    "jq": _parse_jq,
    "micropython_test": _parse_micropython,
    "doctest": _parse_doctest,
    "ctest": _parse_ctest,
}

MARKERS = {
    "googletest": markers(r"^\[==========\] ", r"^\[ RUN      \] ", *NATIVE_BUILD),
    "redis": markers(r"^\[(?:ok|err|skip|ignore|exception)\]: ", r"All tests passed", *NATIVE_BUILD),
    "jq": markers(r"^\s*(?:PASS|FAIL|SKIP|ERROR|XFAIL): \S", r"^# (?:TOTAL|PASS|FAIL): ", *NATIVE_BUILD),
    "micropython_test": markers(r"^(?:pass|FAIL|skip)\s+\S", r"^\d+ tests (?:performed|passed)", *NATIVE_BUILD),
    "doctest": markers(r"<doctest\b", r"\[doctest\] ", *NATIVE_BUILD),
    "ctest": markers(r"^Test project ", r"^\s*\d+/\d+ Test +#\d+: ", r"tests passed, \d+ tests? failed",
                     r"No tests were found", *NATIVE_BUILD),
}
