"""JavaScript/TypeScript test logs.

SWE-bench's parsers, spelling ids as they do:
- `jest` (`jest --verbose`): the test's own title, without its describe blocks: `✓ adds (3 ms)` -> `adds`;
  `○ skipped x` -> `skipped x` (SKIPPED).
- `vitest` (`vitest --reporter=verbose`): the line after the mark, file and titles joined by ` > `:
  `vt/calc.test.js > calc > adds`; `×` FAILED, `↓` SKIPPED.
- `tap`: what follows `ok <n> ` / `not ok <n> `, so `ok 1 - adds` -> `- adds`; a `# SKIP` line is PASSED there.
- `karma`: the describe blocks by indentation, then the title, joined by ` > `.
- `immutable_js`: `jest`'s lines and `jest_json`'s `[PASSED] <id>` lines (SWE-bench picks one by instance).

codeagent's JSON ones, reading every document of the reporter in the log (text around it is skipped):
- `jest_json` (`jest --json`) and `vitest_json` (`vitest run --reporter=json`, the same schema): the
  describe blocks (`ancestorTitles`) then the title, joined by ` > `: `calc > nested suite > throws`,
  the spelling of SWE-bench's `jest_json`, whose lines `[PASSED] <id>` / `[FAILED] <id>` (jest's JSON
  through its jq transform) `jest_json` reads too. passed -> PASSED, failed -> FAILED, pending / skipped /
  todo / disabled -> SKIPPED. A test file that failed to run (a syntax or import error) is recorded as
  ERROR under its path (`name` in the JSON), so the run's failure shows even when its tests are not listed.
- `mocha_json` (`mocha --reporter json`): mocha's `fullTitle` (the suite titles and the title joined by a
  space), as SWE-bench's prismjs parser reads it. passes -> PASSED, pending -> SKIPPED, failures -> FAILED
  (a failing hook is reported under the hook's title, `calc "before all" hook for "x"`; its tests are
  missing); a failure is recorded after the passes, so a test reported in both has failed.
"""

from __future__ import annotations

import re
from typing import Any

from .base import ERROR, FAILED, PASSED, SKIPPED, Parser, Record, clean, clean_lines, json_objects, markers

_JEST = re.compile(r"^\s*(✓|✕|○)\s(.+?)(?:\s\((\d+\s*m?s)\))?$")
_JEST_MARKS = {"✓": PASSED, "✕": FAILED, "○": SKIPPED}
_VITEST = re.compile(r"^\s*(✓|×|↓)\s(.+?)(?:\s(\d+\s*m?s?|\[skipped\]))?$")
_VITEST_MARKS = {"✓": PASSED, "×": FAILED, "↓": SKIPPED}
_JQ_LINE = re.compile(r"^\[(PASSED|FAILED)\]\s(.+)$")
_TAP = re.compile(r"^(ok|not ok) (\d+) (.+)$")
_KARMA = re.compile(r"^(\s*)?([✔✖])?\s(.*)$")
_JSON_STATUS = {"passed": PASSED, "failed": FAILED, "pending": SKIPPED, "skipped": SKIPPED, "todo": SKIPPED,
                "disabled": SKIPPED}


def _marked_lines(pattern: re.Pattern[str], statuses: dict[str, str]) -> Parser:
    def parse(log: str, record: Record) -> None:
        for line in clean_lines(log):
            match = pattern.match(line)
            if match:
                record(match.group(2).strip(), statuses[match.group(1)])

    return parse


_JEST_VERBOSE = _marked_lines(_JEST, _JEST_MARKS)


def _parse_tap(log: str, record: Record) -> None:
    for line in clean_lines(log):
        match = _TAP.match(line)
        if match:
            record(match.group(3), PASSED if match.group(1) == "ok" else FAILED)


def _parse_karma(log: str, record: Record) -> None:
    indent, suites, started = -1, [], False
    for raw in log.split("\n"):
        line = clean(raw)
        if line.startswith("SUMMARY:"):
            return  # the per-test lines end here
        if "Starting browser" in line:
            started = True
            continue
        match = _KARMA.match(line) if started else None
        if not match:
            continue
        spaces, mark, name = match.groups()
        if spaces and not mark:  # a describe block, nested by its indentation
            if len(spaces) > indent:
                indent = len(spaces)
                suites.append(name)
            elif len(spaces) < indent:
                indent = len(spaces)
                if suites:
                    suites.pop()
                continue
        if mark:
            record(" > ".join([*suites, name]), PASSED if mark == "✔" else FAILED)


def _record_suites(report: dict[str, Any], record: Record) -> None:
    """One `jest --json` / `vitest --reporter=json` document."""
    for suite in report.get("testResults") or []:
        if not isinstance(suite, dict):
            continue
        failing = False
        for test in suite.get("assertionResults") or []:
            if not isinstance(test, dict) or not isinstance(test.get("title"), str):
                continue
            status = _JSON_STATUS.get(test.get("status"))  # type: ignore[arg-type]
            if status:
                ancestors = [str(title) for title in test.get("ancestorTitles") or []]
                record(" > ".join([*ancestors, test["title"]]), status)
                failing = failing or status == FAILED
        if suite.get("status") == "failed" and not failing and isinstance(suite.get("name"), str):
            record(suite["name"], ERROR)


def _parse_jest_json(log: str, record: Record) -> None:
    for report in json_objects(log, required="testResults"):
        _record_suites(report, record)
    _parse_jq_lines(log, record)


def _parse_jq_lines(log: str, record: Record) -> None:
    for line in clean_lines(log):
        match = _JQ_LINE.match(line)
        if match:
            record(match.group(2), match.group(1))


def _parse_immutable_js(log: str, record: Record) -> None:
    # SWE-bench picks jest's (instance 2006, `jest --verbose`) or jest_json's (2005, the jq lines) by
    # instance; the two formats share no line, so reading both gives each instance its own
    _JEST_VERBOSE(log, record)
    _parse_jq_lines(log, record)


def _parse_vitest_json(log: str, record: Record) -> None:
    for report in json_objects(log, required="testResults"):
        _record_suites(report, record)


def _parse_mocha_json(log: str, record: Record) -> None:
    for report in json_objects(log, required="stats"):
        for key, status in (("passes", PASSED), ("pending", SKIPPED), ("failures", FAILED)):
            for test in report.get(key) or []:
                if isinstance(test, dict) and isinstance(test.get("fullTitle"), str):
                    record(test["fullTitle"], status)


PARSERS: dict[str, Parser] = {
    "jest": _JEST_VERBOSE,
    "immutable_js": _parse_immutable_js,
    "vitest": _marked_lines(_VITEST, _VITEST_MARKS),
    "tap": _parse_tap,
    "karma": _parse_karma,
    "jest_json": _parse_jest_json,
    "vitest_json": _parse_vitest_json,
    "mocha_json": _parse_mocha_json,
}

# A run that never reached the tests still prints the runner's summary or its failure to load a file.
_JEST_TEXT = (r"^(?:PASS|FAIL) \S", r"^Test Suites: ", r"Test suite failed to run")
_VITEST_TEXT = (r"^\s*(?:Test Files|Tests)\s+\d+ ", r"^\s*RUN\s+v\d", r"^\s*FAIL\s+\S+\.(?:[cm]?[jt]sx?)\b")
MARKERS = {
    "jest": markers(r"^\s*[✓✕○✎] ", *_JEST_TEXT),
    "vitest": markers(r"^\s*[✓×↓] ", *_VITEST_TEXT),
    "tap": markers(r"^\s*(?:not )?ok \d+ ", r"^TAP version \d+", r"^\s*1\.\.\d+$"),
    "karma": markers(r"Starting browser", r"^SUMMARY:", r"\bExecuted \d+ of \d+"),
    "jest_json": markers(r'^\{"num\w+":', r'"testResults":', r"^\[(?:PASSED|FAILED|PENDING|TODO)\] ", *_JEST_TEXT),
    "immutable_js": markers(r"^\s*[✓✕○✎] ", r"^\[(?:PASSED|FAILED|PENDING|TODO)\] ", *_JEST_TEXT),
    "vitest_json": markers(r'^\{"num\w+":', r'"testResults":', *_VITEST_TEXT),
    "mocha_json": markers(r'^\s*"stats": \{', r"^\s*Exception during run: ", r"^\s*\d+ (?:passing|failing|pending)\b"),
}
