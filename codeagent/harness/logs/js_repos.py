"""SWE-bench's parsers written for one JavaScript repository each (SWE-bench Multimodal), under their
names, spelling ids as they do:

- `react_pdf` and `carbon`: jest's per-file lines, `PASS <file> (1.2 s)` / `FAIL <file>`, the timing dropped.
- `grommet`: the same lines, every FAIL read before every PASS (a file reported both ways passes).
- `marked`: mocha/jasmine's numbered failures, `1) <title>` at the start of a line (FAILED only).
- `chart_js`: karma's `Chrome <version> (<os>) <title> FAILED` lines (FAILED only).
- `eslint`: mocha's failure blocks, `  1) <title ...>` up to the first `...Error`, whitespace collapsed.
- `bpmn_js`, `openlayers`: karma's `FAILED` lines for their browsers, and openlayers' mocha failure
  blocks and `case <name>: mismatch` rendering cases (FAILED only).
- `highlightjs`: mocha's spec reporter: `✓ <title>` PASSED and `1) <title>` FAILED, each under the
  last line indented by two spaces (its suite), joined by `.`; the summary after `N passing` is not read.
- `prismjs`: the JSON documents printed after each `./node_modules/.bin/mocha tests/run.js --reporter json`:
  `fullTitle` of failures FAILED, then of passes PASSED.
"""

from __future__ import annotations

import json
import re

from .base import FAILED, PASSED, Parser, Record, clean, markers

# tried in this order, the first that matches a line decides
_JEST_FILE = [(re.compile(rf"^{word}\s(.*){timing}"), status) for word, status in (("PASS", PASSED), ("FAIL", FAILED))
              for timing in (r"\s\([\d.]+ms\)", r"\s\([\d.]+\ss\)", r"\s\([\d.]+s\)", "")]
_GROMMET = [(re.compile(rf"^{word}\s(.*)", re.MULTILINE), status) for word, status in (("FAIL", FAILED), ("PASS", PASSED))]
_TIMING = re.compile(r"\s\([\d.]+\s?(?:ms|s)\)$")
_NUMBERED = re.compile(r"^\d+\)\s(.*)")
_NUMBER = re.compile(r"^\d+\)")
_CHART = re.compile(r"Chrome\s[\d.]+[^\S\r\n]\(.+?\)[^\S\r\n](.*)FAILED$", re.MULTILINE)
_ESLINT = (re.compile(r"(\s{2}\d+\))([\s\S]*?)\s+(?:(.*)Error)"), "Error")
_BPMN = (re.compile(r"2KPhantomJS\s[\d.]+\s\(Linux\s[\d.]+\)\s(.*)FAILED\n"),
         re.compile(r"2KPhantomJS\s[\d.]+\s\(Linux\sx86_64\)\s(.*)FAILED\n"),
         re.compile(r"Chrome\sHeadless\s(.*)\s\(Linux\sx86_64\)\s(.*)FAILED\n"),
         re.compile(r"HeadlessChrome\s[\d.]+\s\(Linux\s[\d.]+\)\s(.*)FAILED\n"))
# (pattern, the text every match ends with: the log after its last occurrence cannot match)
_OPENLAYERS = ((re.compile(r"Chrome\sHeadless\s[\d.]+\s\(Linux\s[\d._\S]+\)\s(.*)\sFAILED\n", re.M), "FAILED\n"),
               (re.compile(r"Chrome\s[\d.]+\s\(Linux\s[\d._\S]+\)\s(.*)FAILED\n", re.M), "FAILED\n"),
               (re.compile(r"^\s{2}\d+\)([\s\S]*?)Error:", re.M), "Error:"),
               (re.compile(r"^case\s(.*):\smismatch", re.M), "mismatch"))
_MOCHA_SUMMARY = re.compile(r"\n[ \t]*\d+ passing")
_MS = re.compile(r"\(\d+ms\)")
_PRISM_COMMAND = "./node_modules/.bin/mocha tests/run.js --reporter json"


def _jest_files(log: str, record: Record) -> None:
    for line in log.split("\n"):
        line = clean(line)
        for pattern, status in _JEST_FILE:
            match = pattern.match(line)
            if match:
                record(match.group(1), status)
                break


def _parse_grommet(log: str, record: Record) -> None:
    log = clean(log)
    for pattern, status in _GROMMET:
        for found in pattern.findall(log):
            record(_TIMING.sub("", found.strip()), status)


def _parse_marked(log: str, record: Record) -> None:
    for line in log.split("\n"):
        match = _NUMBERED.match(clean(line))
        if match:
            record(match.group(1).strip(), FAILED)


def _findall_failures(*patterns: tuple[re.Pattern[str], str], group: int = 0, collapse: bool = False) -> Parser:
    def parse(log: str, record: Record) -> None:
        for pattern, ending in patterns:
            last = log.rfind(ending)
            for found in pattern.findall(log[:last + len(ending)] if last >= 0 else ""):
                name = found[group] if isinstance(found, tuple) else found
                record(" ".join(name.split()) if collapse else name, FAILED)

    return parse


def _parse_bpmn_js(log: str, record: Record) -> None:
    for pattern in _BPMN:
        for found in pattern.findall(log):
            record(found[1] if isinstance(found, tuple) else found, FAILED)


def _parse_chart_js(log: str, record: Record) -> None:
    for found in _CHART.findall(clean(log)):
        record(found, FAILED)


def _without_ms(name: str) -> str:
    return _MS.sub("", name).strip()


def _parse_highlightjs(log: str, record: Record) -> None:
    suite: list[str] = []
    for line in _MOCHA_SUMMARY.split(log)[0].split("\n"):
        line = clean(line)
        stripped = line.strip()
        if stripped.startswith(("✓", "✔")):
            record(".".join([*suite, _without_ms(stripped[1:])]), PASSED)
        elif _NUMBER.match(stripped):
            record(".".join([*suite, _without_ms(stripped.split(")", 1)[1])]), FAILED)
        elif line.startswith("  "):
            suite = [stripped]


def _parse_prismjs(log: str, record: Record) -> None:
    for chunk in log.split(_PRISM_COMMAND)[1:]:
        body = chunk.split("{", 1)[-1].rsplit("}", 1)[0]
        try:
            report = json.loads("{" + body + "}")
        except ValueError:
            continue
        if not isinstance(report, dict):
            continue
        for key, status in (("failures", FAILED), ("passes", PASSED)):
            for test in report.get(key) or []:
                if isinstance(test, dict) and isinstance(test.get("fullTitle"), str):
                    record(test["fullTitle"], status)


PARSERS: dict[str, Parser] = {
    "react_pdf": _jest_files,
    "carbon": _jest_files,
    "grommet": _parse_grommet,
    "marked": _parse_marked,
    "chart_js": _parse_chart_js,
    "eslint": _findall_failures(_ESLINT, group=1, collapse=True),
    "bpmn_js": _parse_bpmn_js,
    "openlayers": _findall_failures(*_OPENLAYERS, collapse=True),
    "highlightjs": _parse_highlightjs,
    "prismjs": _parse_prismjs,
}

_JEST = (r"^(?:PASS|FAIL)\s\S", r"^Test Suites: ", r"Test suite failed to run")
_MOCHA = (r"^\s*\d+ (?:passing|failing|pending)\b", r"^\s*\d+\) \S")
_KARMA = (r"Executed \d+ of \d+", r"Starting browser", r"\((?:Linux|Mac OS|Windows)[^)\n]*\) ")
MARKERS = {
    "react_pdf": markers(*_JEST), "carbon": markers(*_JEST), "grommet": markers(*_JEST),
    "marked": markers(*_MOCHA, r"^\s*\d+ (?:specs?|tests?), \d+ failures?"),
    "chart_js": markers(*_KARMA), "bpmn_js": markers(*_KARMA), "openlayers": markers(*_KARMA, *_MOCHA),
    "eslint": markers(*_MOCHA), "highlightjs": markers(*_MOCHA),
    "prismjs": markers(r'"stats": \{', *_MOCHA, r"^\s*Exception during run: "),
}
