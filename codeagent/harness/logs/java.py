"""Java test logs, and JUnit XML reports (Java, C/C++).

SWE-bench's parsers, spelling ids as they do:
- `maven`: one `mvn test -Dtest=<id>` per test, traced by `set -x`; each `-Dtest=<id>` is paired, in
  order, with the next `BUILD SUCCESS` (PASSED) / `BUILD FAILURE` (FAILED), a result that came before
  its command waiting for the next one.
- `ant`: `[junit] [PASS] <id>` (`FAIL` and `ERR`: FAILED).
- `gradle_custom`: `<class> > <method> PASSED|FAILED`, the status possibly on a line of its own after
  the name (interleaved output).

codeagent's `junit_xml`: the JUnit XML reports the test command prints into the log (Maven Surefire's
`TEST-*.xml`, Gradle's, `ctest --output-junit`, googletest's `--gtest_output=xml`); every
`<testsuite>` in the log is read, in or out of a `<testsuites>` document (of a suite nested in a
suite, the inner one). A test is `classname.name` (`calc.CalcTest.adds`, `calc.CalcTest$Inner.innerAdds`,
googletest's `Calc.Adds`), or `name` alone when the classname is empty or the name itself (ctest). A `<failure>` child makes it FAILED, `<error>`
ERROR, `<skipped>` SKIPPED, as does a `status` of `notrun` / `disabled` (ctest, googletest), except a
ctest test it could not run (`Unable to find executable`: the build failed), ERROR; otherwise PASSED.
A document that is not well-formed (a report cut short) is skipped.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from .base import ERROR, FAILED, NATIVE_BUILD, PASSED, SKIPPED, Parser, Record, clean_lines, markers

_DTEST = re.compile(r"^.*-Dtest=(\S+).*$")
_BUILD = re.compile(r"^.*BUILD (SUCCESS|FAILURE)$")
_ANT = re.compile(r"^\s*\[junit\]\s+\[(PASS|FAIL|ERR)\]\s+(.*)$")
_GRADLE_FULL = re.compile(r"^([^>].+)\s+(PASSED|FAILED)$")
_GRADLE_NAME = re.compile(r"^([^>]\S*\s+>\s+\S+)$")
_GRADLE_STATUS = re.compile(r"^(PASSED|FAILED)$")
_SUITE = re.compile(r"<testsuite\b")
_SUITE_END = "</testsuite>"
_NOT_RUN = frozenset({"notrun", "disabled", "skipped"})
# ctest's reasons for not running a test that it did not mean to skip (the build failed, say)
_CANNOT_RUN = ("Unable to find executable", "Failed to start", "Required files missing", "Fixture dependency failed")


def _parse_maven(log: str, record: Record) -> None:
    waiting: list[str] = []
    early: list[str] = []  # results seen before any command was waiting for one
    for line in clean_lines(log):
        command = _DTEST.match(line)
        if command:
            waiting.append(command.group(1))
        result = _BUILD.match(line)
        if result:
            if waiting:
                record(waiting.pop(0), PASSED if result.group(1) == "SUCCESS" else FAILED)
            else:
                early.append(result.group(1))
    for test, outcome in zip(waiting, early):
        record(test, PASSED if outcome == "SUCCESS" else FAILED)


def _parse_ant(log: str, record: Record) -> None:
    for line in clean_lines(log):
        match = _ANT.match(line)
        if match:
            record(match.group(2), PASSED if match.group(1) == "PASS" else FAILED)


def _parse_gradle_custom(log: str, record: Record) -> None:
    waiting: str | None = None  # a test name whose status comes on a later line
    for line in clean_lines(log):
        match = _GRADLE_FULL.match(line)
        if match:
            record(match.group(1), match.group(2))
            waiting = None
            continue
        named = _GRADLE_NAME.match(line)
        if named:
            waiting = named.group(1)
            continue
        status = _GRADLE_STATUS.match(line) if waiting else None
        if waiting and status:
            record(waiting, status.group(1))
            waiting = None


def _record_case(case: ET.Element, record: Record) -> None:
    name, classname = case.get("name") or "", case.get("classname") or ""
    if not name:
        return
    test = f"{classname}.{name}" if classname and classname != name else name
    children = {child.tag: child for child in case}
    skipped = children.get("skipped")
    cannot_run = skipped is not None and (skipped.get("message") or "").startswith(_CANNOT_RUN)
    if "error" in children or (cannot_run and case.get("status") == "notrun"):
        record(test, ERROR)
    elif "failure" in children:
        record(test, FAILED)
    elif "skipped" in children or case.get("status") in _NOT_RUN:
        record(test, SKIPPED)
    else:
        record(test, PASSED)


def _parse_junit_xml(log: str, record: Record) -> None:
    # Each <testsuite> from its start to the next </testsuite> (a <testsuites> wrapper is read through
    # its suites). A suite with another suite's start before that end is skipped, so the text of the
    # log is parsed once at most.
    position, close_at = 0, -1
    while True:
        start = _SUITE.search(log, position)
        if not start:
            return
        if close_at < start.start():
            close_at = log.find(_SUITE_END, start.start())
            if close_at < 0:
                return  # cut short: no document ends after this point
        inner = _SUITE.search(log, start.end(), close_at)
        if inner:  # nested, self-closing, or unclosed: the next start is the candidate
            position = inner.start()
            continue
        end = close_at + len(_SUITE_END)
        position = end
        try:
            suite = ET.fromstring(log[start.start():end])
        except ET.ParseError:
            continue
        for case in suite.iter("testcase"):
            _record_case(case, record)


PARSERS: dict[str, Parser] = {
    "maven": _parse_maven,
    "ant": _parse_ant,
    "gradle_custom": _parse_gradle_custom,
    "junit_xml": _parse_junit_xml,
}

# Build tools' own output: the compile step that failed before any report was written.
_MAVEN = (r"BUILD (?:SUCCESS|FAILURE)$", r"COMPILATION ERROR", r"^\[ERROR\] .*\.java:\[\d+,\d+\]")
_GRADLE = (r"BUILD (?:SUCCESSFUL|FAILED)\b", r"^> Task :", r"Compilation failed")
MARKERS = {
    "maven": markers(r"-Dtest=\S", *_MAVEN),
    "ant": markers(r"\[junit\] ", r"BUILD (?:SUCCESSFUL|FAILED)\b", r"\[javac\] "),
    "gradle_custom": markers(r"^\S.* > \S+ (?:PASSED|FAILED)$", *_GRADLE),
    "junit_xml": markers(r"<testsuites?\b", *_MAVEN, *_GRADLE, *NATIVE_BUILD, r"^Test project "),
}
