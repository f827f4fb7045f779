"""Ruby and PHP test logs: SWE-bench's parsers, spelling ids as they do.

- `phpunit` (`phpunit --testdox`): `<suite> > <test>`, the suite from the last `Name (Class\\Name)` line;
  `✔` PASSED, `✘` FAILED, `↩` SKIPPED.
- `minitest`: `<name>. <...>=<...>` ending in a result mark (`.` PASSED, `F` / `E` FAILED).
- `cucumber` (`--format progress`): `<name> ....` then `.` (PASSED) or `F` (FAILED).
- `ruby_unit` (test-unit's verbose runner): `<name>: .` / `E` / `F` / `O` (omitted: SKIPPED).
- `rspec_transformed_json`: `<full description> - passed|failed`, lines a jq transform of rspec's JSON prints.

SWE-bench's `jekyll` picks minitest or cucumber by instance; here a spec names the parser per version.
"""

from __future__ import annotations

import re

from .base import FAILED, PASSED, SKIPPED, Parser, Record, clean, clean_lines, markers

_PHPUNIT_SUITE = re.compile(r"^(\w.+) \(.+\)$")
_PHPUNIT_TEST = re.compile(r"^\s*([✔✘↩])\s*(.*)$")
_PHPUNIT_MARKS = {"✔": PASSED, "✘": FAILED, "↩": SKIPPED}
_MINITEST = re.compile(r"^(.+)\. .*=.*(\.|F|E).*$")
_CUCUMBER = re.compile(r"^(.*) \.+(\.|F)")
_RUBY_UNIT = re.compile(r"^\s*(?:test: )?(.+):\s+(\.|E\b|F\b|O\b)")
_RUBY_UNIT_MARKS = {".": PASSED, "E": FAILED, "F": FAILED, "O": SKIPPED}
_RSPEC = re.compile(r"(.+) - (passed|failed)")


def _parse_phpunit(log: str, record: Record) -> None:
    suite = None
    for raw in log.split("\n"):
        line = clean(raw)
        header = _PHPUNIT_SUITE.match(line)
        if header:
            suite = header.group(1)
            continue
        test = _PHPUNIT_TEST.match(line)
        if test:
            record(f"{suite} > {test.group(2)}", _PHPUNIT_MARKS[test.group(1)])


def _lines(pattern: re.Pattern[str], marks: dict[str, str]) -> Parser:
    def parse(log: str, record: Record) -> None:
        for line in clean_lines(log):
            match = pattern.match(line)
            if match:
                record(match.group(1), marks[match.group(2)])

    return parse


PARSERS: dict[str, Parser] = {
    "phpunit": _parse_phpunit,
    "minitest": _lines(_MINITEST, {".": PASSED, "F": FAILED, "E": FAILED}),
    "cucumber": _lines(_CUCUMBER, {".": PASSED, "F": FAILED}),
    "ruby_unit": _lines(_RUBY_UNIT, _RUBY_UNIT_MARKS),
    "rspec_transformed_json": _lines(_RSPEC, {"passed": PASSED, "failed": FAILED}),
}

_RUBY = (r"\.rb:\d+:in ", r"\.rb:\d+: syntax error", r"\(LoadError\)")
MARKERS = {
    "phpunit": markers(r"^PHPUnit \d", r"^(?:OK|FAILURES!|ERRORS!)", r"^Tests: \d+, Assertions: ",
                       r"PHP (?:Parse|Fatal) error", r"^\s*[✔✘↩] "),
    "minitest": markers(r"\d+ runs, \d+ assertions", r"^# Running", *_RUBY),
    "cucumber": markers(r"\d+ scenarios? \(", r"\d+ steps? \(", *_RUBY),
    "ruby_unit": markers(r"\d+ tests, \d+ assertions", r"^Finished in ", *_RUBY),
    "rspec_transformed_json": markers(r"\d+ examples?, \d+ failures?", r" - (?:passed|failed|pending)$", *_RUBY),
}
