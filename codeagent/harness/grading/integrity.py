"""Does a patch touch the test infrastructure its grading relies on? (issue 10, item 11)

Grading runs tests, so a patch can pass them without fixing anything by changing what runs them:
a `conftest.py` whose hook rewrites every report to passed, a `sitecustomize.py`, pytest settings
(`addopts = -p plugin`), the test files themselves. The official verdict does not look (SWE-bench
only resets the files the test patch touches), and a policy trained on that verdict will find it.

`flag_patch()` names every path of a patch that counts, with the rule that made it count. The
report shows them (`touches_test_infrastructure`, `test_infrastructure`), the official verdict is
left as it is, and rewards and the regression verifier score a flagged patch 0 unless configured
to allow it (`rewards.test_infrastructure`, `score_candidates(test_infrastructure=...)`); so do
they a grade with `masked_failures` (a listed test reported failing, then passing: `reasons()`),
or with `tamper_evidence` (a pytest log that does not match what codeagent's plugin saw: guard.py).

What counts is the data below, in one place. A path counts when:
- its last component is one of NAMES (conftest.py, pytest/tox/nox settings files), or it has a
  component whose stem is one of STARTUP_STEMS (`sitecustomize`, `usercustomize`: Python imports
  them at start-up, as a module or a package) or ends with one of STARTUP_SUFFIXES (`.pth`);
- it has a component ending with one of METADATA_SUFFIXES (`.dist-info`, `.egg-info`: a
  `pytest11` entry point there is a plugin pytest loads at start-up);
- it is a module at the root or beside a runner script (SHADOW_FOLDERS) named like a module of
  the standard library or of the test runner (`doctest.py`, `_pytest/__init__.py`): it is
  imported instead of that one;
- it is one of RUNNERS: the scripts the harness's test commands run (Django's, SymPy's);
- it is a settings file of SECTIONED (setup.cfg, pyproject.toml) and a changed line lies in a
  test section ([tool:pytest], [pytest], [tox...], [testenv...]; [tool.pytest...], [tool.tox...]),
  or the section cannot be told (the base file is not readable): when in doubt it counts;
- the task's test patch touches it (or, for the regression verifier, it is a test file it runs);
- it is a test file by name: test_*.py, *_test.py, tests.py, a name of any language's `test_files`
  patterns (languages/*.yaml: `*_test.go`, `*.spec.ts`, `*Test.java`...), or under a directory named
  one of TEST_DIRS (`tests`, `test`, `testing`, `testdata`, `__tests__`), at any depth. SWE-bench splits
  every instance's change along the same lines (test directories go to the test patch), so no gold patch
  touches one; an agent's final patch should not either: a test it wrote for itself is not part of the fix;
- it matches an entry of a language's `judge: test_infrastructure:` list (languages/*.yaml): a runner's
  settings (`jest.config.js`, `.mocharc.yml`, `.cargo/config.toml`, `.mvn/`), a build script that runs
  at build time (`build.rs`), a report folder (`target/surefire-reports/`); or, for an entry with `lines`
  (`package.json`, `CMakeLists.txt`, `pom.xml`, `Cargo.toml`), a changed line that matches its pattern
  (a `test` script, `add_test`, the surefire plugin...), or the file changed where no hunk can be read.

The paths come from the patch text (codeagent.patches.parse: git and plain unified diffs, hunk
lengths respected, both names of a rename), and the harness adds what `git status` shows changed in the container after
the patch was applied (whatever the appliers made of it, ignored files included; not the appliers'
`.orig`/`.rej` files of a file the patch changes). File names are compared as strings, never
opened on the host.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable

from ... import patches
from ...patches.base import Reader
from .judge import InfrastructureRule, infrastructure_rules

NAMES = {
    "conftest.py": "conftest",
    "pytest.ini": "test settings", ".pytest.ini": "test settings",
    "pytest.toml": "test settings", ".pytest.toml": "test settings",
    "tox.ini": "test settings", "noxfile.py": "test settings",
}
STARTUP_STEMS = ("sitecustomize", "usercustomize")
STARTUP_SUFFIXES = (".pth",)
# Package metadata: importlib.metadata reads it from every folder on sys.path (a `setup.py develop`
# install puts the repository's root there), and pytest imports every `pytest11` entry point it names.
METADATA_SUFFIXES = (".dist-info", ".egg-info", ".egg-link")
# A module at the root (on sys.path when tests run from it, or for a develop install) or beside a
# runner script (sys.path[0] for `bin/test`) wins over the one the runner means to import.
SHADOW_FOLDERS = ("", "bin")
SHADOWED = frozenset(sys.stdlib_module_names) | {
    "pytest", "_pytest", "py", "pluggy", "iniconfig", "nose", "xdist", "_hypothesis_pytestplugin",
    "distutils", "imp", "asynchat", "asyncore", "smtpd"}  # removed from newer Pythons' list
RUNNERS = ("tests/runtests.py", "bin/test", "sympy/utilities/runtests.py", "sympy/testing/runtests.py")
# settings file -> (section-name pattern of its test sections, how a section header looks)
SECTIONED: dict[str, re.Pattern[str]] = {
    "setup.cfg": re.compile(r"tool:pytest|pytest|tox(:.*)?|testenv(:.*)?"),
    "pyproject.toml": re.compile(r"tool\.(pytest|tox)(\..*)?"),  # a key in [tool] is tool.<key>
}
TEST_DIRS = ("tests", "test", "testing", "testdata", "__tests__")
_SECTION_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def is_test_file(path: str) -> bool:
    from fnmatch import fnmatchcase

    from ...code.languages import test_file_patterns

    parts = path.split("/")
    name = parts[-1]
    if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py") or name == "tests.py"):
        return True
    if any(fnmatchcase(name, pattern) for pattern in test_file_patterns()):
        return True
    return any(part in TEST_DIRS for part in parts[:-1])


def path_rule(path: str) -> str | None:
    """Why a path counts by its name alone, or None (settings files with sections: see flag_patch)."""
    parts = path.split("/")
    name = parts[-1]
    if name in NAMES:
        return NAMES[name]
    if any(part.split(".")[0] in STARTUP_STEMS for part in parts) or name.endswith(STARTUP_SUFFIXES):
        return "startup hook"
    if any(part.endswith(METADATA_SUFFIXES) for part in parts):
        return "package metadata (entry points load at start-up)"
    if _shadows(parts):
        return "shadows a module the test runner imports"
    if path in RUNNERS:
        return "test runner"
    if is_test_file(path):
        return "test file"
    for entry in infrastructure_rules():
        if entry.lines is None and entry.matches(path):
            return entry.rule
    return None


def _line_rule(path: str) -> InfrastructureRule | None:
    """The language rule that judges `path` by its changed lines (package.json, CMakeLists.txt...)."""
    return next((entry for entry in infrastructure_rules() if entry.lines is not None and entry.matches(path)), None)


def _touches_lines(diff: patches.FileDiff, pattern: re.Pattern[str]) -> bool:
    return any(text[:1] in ("+", "-") and pattern.search(text[1:]) for hunk in diff.hunks for text in hunk.lines)


def _shadows(parts: list[str]) -> bool:
    """A module (`x.py`, `x.cpython-39-....so`, `x/__init__.py`) in a SHADOW_FOLDERS folder whose name is SHADOWED."""
    name = parts[-1]
    if name.split(".")[0] == "__init__" and len(parts) >= 2:
        folder, module = "/".join(parts[:-2]), parts[-2]
    elif name.endswith((".py", ".pyc", ".pyw", ".so", ".pyd")):
        folder, module = "/".join(parts[:-1]), name.split(".")[0]
    else:
        return False
    return folder in SHADOW_FOLDERS and module in SHADOWED


def _section_at(base_lines: list[str], line_number: int) -> str:
    """The section a 1-based line of a base file lies in (the last header above it)."""
    for text in reversed(base_lines[:max(0, line_number - 1)]):
        header = _SECTION_HEADER.match(text)
        if header:
            return header.group(1)
    return ""


def _touches_test_section(diff: patches.FileDiff, pattern: re.Pattern[str], base: str | None) -> bool:
    """Whether a changed line of a sectioned settings file lies in a test section (a line of a
    new file, a header, or a dotted key like `tool.pytest.ini_options.addopts = ...`)."""
    if diff.old is None:
        base = ""
    if base is None:
        return True  # the section cannot be told: it counts
    base_lines = base.splitlines()
    for hunk in diff.hunks:
        section = _section_at(base_lines, max(hunk.old_start, 1))
        for text in hunk.lines:
            sign, content = text[:1], text[1:]
            header = _SECTION_HEADER.match(content)
            if header:
                if sign != " " and pattern.fullmatch(header.group(1)):
                    return True
                section = header.group(1)
                continue
            if sign not in ("+", "-") or not content.strip():
                continue
            key = content.split("=", 1)[0].strip().strip('"')
            if pattern.fullmatch(section) or pattern.fullmatch(f"{section}.{key}" if section else key):
                return True
    return False


def flag_patch(patch: str | bytes, *, relied_on: Iterable[str] = (), read_base: Reader | None = None,
               extra_paths: Iterable[str] = ()) -> dict[str, str]:
    """{path: rule} for every path of `patch` (and `extra_paths`, changed paths seen another way)
    that touches test infrastructure; empty when none does. `relied_on`: the files the grading's
    tests come from (the test patch's files; the regression verifier's test files). `read_base`
    reads base files (for the sections of setup.cfg / pyproject.toml); without it a changed
    settings file counts."""
    if isinstance(patch, bytes):
        patch = patches.decode(patch)
    relied_on = set(relied_on)
    found: dict[str, str] = {}
    seen_in_text: set[str] = set()
    for diff in patches.parse(patch or ""):
        for path in diff.paths:
            seen_in_text.add(path)
            rule = _rule(path, relied_on)
            name = path.rsplit("/", 1)[-1]
            if rule is None and name in SECTIONED:
                base = read_base(diff.old) if read_base and diff.old else None
                if isinstance(base, bytes):
                    base = base.decode("utf-8", errors="replace")
                if _touches_test_section(diff, SECTIONED[name], base):
                    rule = "test settings"
            if rule is None and (by_lines := _line_rule(path)) is not None and by_lines.lines is not None:
                rule = by_lines.rule if _touches_lines(diff, by_lines.lines) else None
            if rule:
                found.setdefault(path, rule)
    for path in extra_paths:
        if path in seen_in_text or path in found:
            continue
        if path.endswith((".orig", ".rej")) and path.rsplit(".", 1)[0] in seen_in_text:
            continue  # the appliers' backup or reject file of a file the patch changes
        rule = _rule(path, relied_on)
        if rule is None and (path.rsplit("/", 1)[-1] in SECTIONED or _line_rule(path) is not None):
            rule = "test settings"  # changed, but not by a hunk that can be read: it counts
        if rule:
            found[path] = rule
    return dict(sorted(found.items()))


def _rule(path: str, relied_on: set[str]) -> str | None:
    if path in relied_on:
        return "test patch file"
    return path_rule(path)


# Lists every changed, untracked and ignored path in the container's /testbed, NUL-separated.
STATUS_COMMAND = "git -c core.quotepath=off status --porcelain=v1 -z --untracked-files=all --ignored=matching --no-renames"


def status_entries(output: str) -> set[str]:
    """`git status -z` output -> its entries (status and path), compared before and after applying."""
    return {entry for entry in output.split("\0") if len(entry) > 3}


def changed_paths(before: set[str], after: set[str]) -> list[str]:
    """The paths whose status entry the patch created or changed."""
    return sorted({entry[3:] for entry in after - before})


def report_fields(flags: dict[str, str]) -> dict:
    """The report's fields for a flag result."""
    return {"touches_test_infrastructure": sorted(flags), "test_infrastructure": dict(flags)}


def reasons(report: dict) -> list[str]:
    """Why a graded report cannot count for rewards and verifier scores: the test infrastructure
    the patch touches, and the listed tests that pass although the log also reports them failing
    (`masked_failures`, see verdict.py: a patch that prints a fake PASSED line after the real
    FAILED one passes by SWE-bench's last-line rule), and where the log and codeagent's pytest
    plugin disagree (`tamper_evidence`, see guard.py). Empty: nothing to distrust."""
    flags = report.get("test_infrastructure") or {}
    found = [f"{path} ({flags.get(path, 'test infrastructure')})" for path in report.get("touches_test_infrastructure") or []]
    found += [f"{test} (reported failing, then passing)" for test in report.get("masked_failures") or []]
    found += [f"tamper evidence: {item}" for item in report.get("tamper_evidence") or []]
    return found


def zeroed(report: dict, policy: str = "zero") -> bool:
    """Whether a graded report must count as 0 for rewards and verifier scores under `policy`
    ("zero", the default, or "allow")."""
    if policy not in ("zero", "allow"):
        raise ValueError(f"test_infrastructure must be 'zero' or 'allow', not {policy!r}")
    return policy == "zero" and bool(reasons(report))
