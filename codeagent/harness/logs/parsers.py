"""Test-log parsers: a test run's output -> {test id: status}.

`parse_log(parser, log)` runs one of the named parsers in `PARSERS`; `parser_for_repo(repo)` names
the one SWE-bench uses for a repository. Statuses are the five SWE-bench uses: PASSED, FAILED,
SKIPPED, ERROR, XFAIL.

Test ids are spelled exactly the way SWE-bench's FAIL_TO_PASS / PASS_TO_PASS lists spell them:

- pytest family: the node id as the first whitespace-separated token of the status line, so a
  parameter with a space in it is cut there (`tests/x.py::test_f[a b]` -> `tests/x.py::test_f[a`),
  as in the official lists. `pytest_v2` (astropy, scikit-learn, sphinx) keeps the whole id;
  grading matches a cut id against it (see `grading.lookup`). `pytest_options` shortens an
  absolute-path parameter to its last component (`test_stdin[/tmp/x/mymodule.py]` ->
  `test_stdin[/mymodule.py]`); `matplotlib` writes MouseButton.LEFT/RIGHT as 1/3.
- django: unittest's verbose description, `test_name (module.ClassName)` (on Python >= 3.11
  `test_name (module.ClassName.test_name)`), or, for a test with a docstring, the docstring's
  first line, which unittest prints on its own line before ` ... ok`.
- sympy: the bare function name, `test_name`.

The other languages' parsers live in log_parsers_<language>.py, whose docstrings spell out each
format and id; each also has `MARKERS` (its tool's output, see grading/verdict.py's unknown-format rule).
SWE-bench's, under its function's name without `parse_log_`, spelling ids exactly as it does:
`gotest` (Go); `cargo` (Rust); `jest`, `jest_json`, `vitest`, `tap`, `karma`, `immutable_js`
(JavaScript/TypeScript) and the SWE-bench Multimodal repositories' `react_pdf`, `carbon`, `grommet`,
`marked`, `chart_js`, `eslint`, `bpmn_js`, `openlayers`, `highlightjs`, `prismjs`;
`maven`, `ant`, `gradle_custom` (Java); `googletest`, `redis`, `jq`, `micropython_test`, `doctest`
(C/C++); `phpunit` (PHP); `minitest`, `cucumber`, `ruby_unit`, `rspec_transformed_json` (Ruby).
codeagent's own, for the structured reports: `go_json` (`go test -json`), `nextest` (cargo nextest),
`jest_json` (also reads `jest --json` itself), `vitest_json`, `mocha_json`, `junit_xml` (Surefire,
Gradle, `ctest --output-junit`, googletest XML), `ctest` (ctest's lines). Not here: SWE-bench's
`calypso`, `p5js`, `quarto_cli`, and its switches by instance or version (`jekyll`, `lighthouse`,
`next`): a language spec names the parser per version instead.

Two rules on top of the formats:

1. A test reported several times takes its LAST status, as in SWE-bench, whose parsers assign one
   dict entry per line (issue 12, defect 4: pytest-5227 lists a junk id `[100%]` reported FAILED
   once and PASSED eight times; only the last line counts). The returned map is in the order of
   each id's last report, so several ids that SWE-bench would have cut to one key resolve to the
   one reported last (`grading.lookup`). The ids reported with different statuses are kept in
   `Statuses.conflicts` for the report. A patch that prints a fake `PASSED <id>` after the real
   `FAILED <id>` is caught by the exit-status check in grading, or else named in the report as a
   masked failure (see grading/verdict.py), not here.
   `parse_log(..., merge="worst")` keeps the worst status instead, for comparisons.
2. Pass-like statuses are recorded only from the lines SWE-bench's own parsers read, so a test
   never passes here where it would not pass there. Failure statuses are also read from a few
   more places (django's `FAIL: <id>` / `ERROR: <id>` blocks and `unexpected success`, sympy's
   failure headers, pytest's verbose `<id> FAILED` lines, seaborn's `ERROR` lines); they are
   recorded where they stand in the log, so the last report of a test still decides. Sympy's
   failure headers are read before its result lines, as SWE-bench does.

Deliberately left unrecorded, like the official harness (so the test counts as not passed):
django's `expected failure` and sympy's `f` (expected to fail) / `X` / skip markers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum
from typing import Literal

from . import c as log_parsers_c
from . import go as log_parsers_go
from . import java as log_parsers_java
from . import js as log_parsers_js
from . import js_repos as log_parsers_js_repos
from . import ruby_php as log_parsers_ruby_php
from . import rust as log_parsers_rust
from .base import clean as _clean
from .base import clean_lines


class TestStatus(str, Enum):
    PASSED = "PASSED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    ERROR = "ERROR"
    XFAIL = "XFAIL"

    __test__ = False  # not a pytest test class


STATUSES = tuple(status.value for status in TestStatus)
PASSING = frozenset({"PASSED", "XFAIL"})
FAILING = frozenset({"FAILED", "ERROR"})
# Worst last. XFAIL and SKIPPED are ordered so that a skip cannot be masked by a fake XFAIL line.
SEVERITY = {"PASSED": 0, "XFAIL": 1, "SKIPPED": 2, "ERROR": 3, "FAILED": 4}

Merge = Literal["last", "worst"]


def worse(a: str, b: str) -> str:
    """The worse of two statuses."""
    return a if SEVERITY[a] >= SEVERITY[b] else b


class Statuses(dict):
    """{test id: status}, in the order of each id's last report; `conflicts`: the ids reported
    with more than one status; `reported_failing`: the ids reported FAILED or ERROR at least once."""

    def __init__(self) -> None:
        super().__init__()
        self.conflicts: set[str] = set()
        self.reported_failing: set[str] = set()
        self.parser = ""  # the parser that read the log
        # whether the log shows its tool's output (MARKERS); None: the parser cannot tell
        self.format_seen: bool | None = None


class _Results:
    """Collects statuses; a test seen twice keeps the last one (or the worse one, for comparisons)."""

    def __init__(self, merge: Merge) -> None:
        self.statuses = Statuses()
        self._merge = merge

    def __call__(self, test: str, status: str) -> None:
        if not test:
            return
        old = self.statuses.pop(test, None)
        if old is not None and old != status:
            self.statuses.conflicts.add(test)
        if status in FAILING:
            self.statuses.reported_failing.add(test)
        self.statuses[test] = status if old is None or self._merge == "last" else worse(old, status)


Parser = Callable[[str, _Results], None]

# ---------------------------------------------------------------------------------------- pytest

_SKIP_COUNT = re.compile(r"\[\d+\]")  # `SKIPPED [2] tests/x.py:10: reason` names a location, not a test
_PROGRESS = re.compile(r"\s*\[\s*\d+%\]$")  # ` [ 42%]` at the end of a verbose line
_OPTION = re.compile(r"(.*?)\[(.*)\]")


def _split_message(rest: str) -> str:
    """`<node id> - <message>` -> `<node id>`, not cutting a ` - ` inside the id's brackets."""
    depth = 0
    for i, char in enumerate(rest):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        elif depth == 0 and rest.startswith(" - ", i):
            return rest[:i]
    return rest


def _shorten_option(test: str) -> str:
    match = _OPTION.search(test)
    if not match:
        return test
    main, option = match.groups()
    if option.startswith("/") and not option.startswith("//") and "*" not in option:
        option = "/" + option.split("/")[-1]
    return f"{main}[{option}]"


def _pytest_family(*, full_ids: bool = False, options: bool = False, mouse_buttons: bool = False,
                   seaborn: bool = False) -> Parser:
    def parse(log: str, record: _Results) -> None:
        for raw in log.split("\n"):
            line = _clean(raw)
            if mouse_buttons:
                line = line.replace("MouseButton.LEFT", "1").replace("MouseButton.RIGHT", "3")
            tokens = line.split()
            if len(tokens) < 2:
                continue
            head = tokens[0]
            if head in STATUSES and line.startswith(head):
                # short test summary line: `STATUS <node id>[ - <message>]`
                if head == "SKIPPED" and _SKIP_COUNT.fullmatch(tokens[1]):
                    continue
                if full_ids:
                    test = " ".join(_split_message(line[len(head):].strip()).split())
                else:
                    test = tokens[1]
                if options:
                    test = _shorten_option(test)
                if seaborn and head not in ("PASSED", "FAILED", "ERROR"):
                    continue  # seaborn's official parser reads only these summary lines
                record(test, head)
                continue
            # verbose line: `<node id> STATUS`, possibly followed by ` [ 42%]`
            body = _PROGRESS.sub("", line).rstrip()
            words = body.split()
            if len(words) < 2 or words[-1] not in STATUSES or "::" not in words[0]:
                continue
            status = words[-1]
            progress = body != line.rstrip()
            if full_ids and not progress:
                # classic console style (astropy's `-o console_output_style=classic`)
                record(" ".join(words[:-1]), status)
            elif seaborn and status == "PASSED" and progress and len(words) == 2:
                record(words[0], status)
            elif status in FAILING:
                test = " ".join(words[:-1]) if full_ids else words[0]
                record(_shorten_option(test) if options else test, status)

    return parse


# ---------------------------------------------------------------------------------------- django

_DJANGO_PASS_SUFFIXES = (" ... ok", " ... OK", " ...  OK")
_SUBTEST = re.compile(r"^(\S+ \([\w.]+\)) [(\[].*$")  # `test_x (m.C) (i=1)` -> `test_x (m.C)`
# Lines that Django's own output can wedge between `<test> ... ` and its `ok`.
_DJANGO_INTERRUPTED = (
    re.compile(r"^(.*?)\s\.\.\.\sTesting\ against\ Django\ installed\ in\ ((?s:.*?))\ silenced\)\.\nok$",
               re.MULTILINE),
    re.compile(r"^(.*?)\s\.\.\.\sInternal\ Server\ Error:\ \/(.*)\/\nok$", re.MULTILINE),
    re.compile(r"^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$", re.MULTILINE),
)
_VERSION_QUIRK = "--version is equivalent to version"  # admin_scripts prints over its own line
_SITES_QUIRK = "Applying sites.0002_alter_domain_unique...test_no_migrations"


def _record_failure_with_parent(record: _Results, test: str, status: str) -> None:
    record(test, status)
    parent = _SUBTEST.match(test)
    if parent:  # a failing subtest fails its test
        record(parent.group(1), status)


def _parse_django(log: str, record: _Results) -> None:
    lines = [_clean(raw).strip() for raw in log.split("\n")]
    previous: str | None = None
    for index, line in enumerate(lines):
        if _VERSION_QUIRK in line:
            record(_VERSION_QUIRK, "PASSED")
        if " ... " in line:
            previous = line.split(" ... ")[0]
        for suffix in _DJANGO_PASS_SUFFIXES:
            if line.endswith(suffix):
                if line.startswith(_SITES_QUIRK):
                    line = line.split("...", 1)[-1].strip()
                record(line.rsplit(suffix, 1)[0], "PASSED")
                break
        if " ... skipped" in line:
            record(line.split(" ... skipped")[0], "SKIPPED")
        if line.endswith(" ... FAIL"):
            _record_failure_with_parent(record, line.split(" ... FAIL")[0], "FAILED")
        if line.endswith(" ... ERROR"):
            _record_failure_with_parent(record, line.split(" ... ERROR")[0], "ERROR")
        if line.endswith(" ... unexpected success"):
            record(line.split(" ... unexpected success")[0], "FAILED")
        for prefix, status in (("FAIL:", "FAILED"), ("ERROR:", "ERROR")):
            if line.startswith(prefix) and index and lines[index - 1].startswith("=" * 10):
                # a failure block: a rule of `=`, `FAIL: <id>`, the docstring's first line if any
                _record_failure_with_parent(record, line[len(prefix):].strip(), status)
                following = lines[index + 1] if index + 1 < len(lines) else ""
                if following and not following.startswith("-" * 10):
                    record(following, status)
        if line.startswith("ok") and previous is not None:
            # `<test> ... <output the test printed>` ... then `ok` on a line of its own
            record(previous, "PASSED")
    for pattern in _DJANGO_INTERRUPTED:
        for match in pattern.finditer(log):
            record(match.group(1), "PASSED")


# ----------------------------------------------------------------------------------------- sympy

# `________ sympy/core/tests/test_basic.py:test_equality ________` (newer sympy writes `::`);
# an exception outside any test names the file alone
_SYMPY_FAILURE_HEADER = re.compile(r"^_+ (\S+\.py)(?:::?(\w+))? _+$")
_SYMPY_IMPORT_FAILED = re.compile(r"^(\S+\.py)\[\?\]\s+Failed to import")
_SYMPY_FILE_DONE = re.compile(r"\s+\[(OK|FAIL)\]$")  # sympy ends a file's last test line so


def _parse_sympy(log: str, record: _Results) -> None:
    lines = [_clean(raw).strip() for raw in log.split("\n")]
    for line in lines:  # SWE-bench reads the failure headers first, then the result lines
        header = _SYMPY_FAILURE_HEADER.match(line)
        if header:
            path, test = header.groups()
            if test:
                record(f"{path}:{test}", "FAILED")
                record(test, "FAILED")
            else:
                record(path, "ERROR")
            continue
        import_failed = _SYMPY_IMPORT_FAILED.match(line)
        if import_failed:  # the run fails; its tests are missing
            record(import_failed.group(1), "ERROR")
    for line in lines:
        if not line.startswith("test_"):
            continue
        line = _SYMPY_FILE_DONE.sub("", line)
        test = line.split()[0]
        if line.endswith(" ok"):
            record(test, "PASSED")
        elif line.endswith(" F"):
            record(test, "FAILED")
        elif line.endswith((" E", " T")):  # T: timed out
            record(test, "ERROR")


_VERBOSE = re.compile(r"^(\S+)\s+(PASSED|FAILED|SKIPPED|ERROR|XFAIL)\b")


def _parse_swe_smith(log: str, record: _Results) -> None:
    """`pytest --verbose` lines (`<node id> PASSED [ 50%]`), as SWE-smith's Python profiles read them
    (SWE-bench's pytest parser takes only failures from such lines: it reads passes from `-rA`)."""
    for line in clean_lines(log):
        match = _VERBOSE.match(line)
        if match:
            record(match.group(1), match.group(2))


def _parse_r2e(log: str, record: _Results) -> None:
    """pytest's short test summary, keyed as R2E-Gym keys it: the id without its file, its parts
    joined by '.', cut at ' - '."""
    if "short test summary info" not in log:
        return
    for line in clean_lines(log.split("short test summary info", 1)[1]):
        for status in ("PASSED", "FAILED", "ERROR"):
            if status in line:
                record(".".join(line.split("::")[1:]).split(" - ")[0].strip(), status)
                break


# -------------------------------------------------------------------------------------- registry

PARSERS: dict[str, Parser] = {
    "pytest": _pytest_family(),
    "pytest_options": _pytest_family(options=True),
    "pytest_v2": _pytest_family(full_ids=True),
    "matplotlib": _pytest_family(mouse_buttons=True),
    "seaborn": _pytest_family(seaborn=True),
    "django": _parse_django,
    "sympy": _parse_sympy,
    "swe-smith": _parse_swe_smith,
    "r2e": _parse_r2e,
}
_LANGUAGES = (log_parsers_go, log_parsers_rust, log_parsers_js, log_parsers_js_repos, log_parsers_java, log_parsers_c,
              log_parsers_ruby_php)
MARKERS: dict[str, re.Pattern[str]] = {}
for _language in _LANGUAGES:
    PARSERS.update(_language.PARSERS)
    MARKERS.update(_language.MARKERS)

REPO_PARSERS: dict[str, str] = {
    "astropy/astropy": "pytest_v2",
    "django/django": "django",
    "marshmallow-code/marshmallow": "pytest",
    "matplotlib/matplotlib": "matplotlib",
    "mwaskom/seaborn": "seaborn",
    "pallets/flask": "pytest",
    "psf/requests": "pytest_options",
    "pvlib/pvlib-python": "pytest",
    "pydata/xarray": "pytest",
    "pydicom/pydicom": "pytest_options",
    "pylint-dev/astroid": "pytest",
    "pylint-dev/pylint": "pytest_options",
    "pytest-dev/pytest": "pytest",
    "pyvista/pyvista": "pytest",
    "scikit-learn/scikit-learn": "pytest_v2",
    "sphinx-doc/sphinx": "pytest_v2",
    "sqlfluff/sqlfluff": "pytest",
    "sympy/sympy": "sympy",
}


def parser_for_repo(repo: str) -> str:
    """The parser name for a SWE-bench repository (`owner/name`); any other repo gets `pytest`."""
    return REPO_PARSERS.get(repo.removeprefix("https://github.com/").removesuffix(".git"), "pytest")


def parse_log(parser: str, log: str, *, merge: Merge = "last") -> Statuses:
    """Parse a test log with a named parser: {test id: status}.

    The last status reported for a test counts, as in SWE-bench. `merge="worst"` keeps the worst
    instead; it exists only for comparisons.
    """
    try:
        parse = PARSERS[parser]
    except KeyError:
        raise ValueError(f"unknown log parser {parser!r}; known: {', '.join(sorted(PARSERS))}") from None
    results = _Results(merge)
    parse(log, results)
    statuses = results.statuses
    statuses.parser = parser
    marker = MARKERS.get(parser)
    if marker is not None:
        statuses.format_seen = bool(statuses) or marker.search(_clean(log)) is not None
    return statuses
