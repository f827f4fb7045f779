"""The regression verifier's test command for a repository that names none: pytest, when the
repository's own files say it is tested with pytest (its settings in pytest.ini, conftest.py,
pyproject.toml, setup.cfg or tox.ini, a tox environment that runs pytest, or pytest-style test
files), as the harness's default test command is pytest. The files are read from git objects,
never from a checkout, and only looked at as text. `run_report` runs a test command in a sandbox
and returns its whole output for a log parser.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from ..git_args import end_of_options, object_id

if TYPE_CHECKING:
    from ..sandbox import Sandbox

PYTEST = "python -m pytest -rA"
REPORT_FILE = ".git/codeagent-test-report.log"  # beside the sandbox repository's own data: never in a diff
MAX_REPORT = 64 << 20
_SETTINGS = {
    "pytest.ini": None,
    "conftest.py": None,
    "pyproject.toml": re.compile(r"^\[tool\.pytest", re.M),
    "setup.cfg": re.compile(r"^\[tool:pytest\]", re.M),
    "tox.ini": re.compile(r"^\[pytest\]|^commands\s*=.*\bpytest\b|^\s+.*\bpytest\b", re.M),
}


def detect(names: list[str], read: Callable[[str], bytes | str | None]) -> tuple[str, str] | None:
    """(command, why) from the repository's file names and a reader of its files; None: no sign of pytest."""
    for name, pattern in _SETTINGS.items():
        if name not in names:
            continue
        text = read(name)
        if isinstance(text, bytes):
            text = text.decode(errors="replace")
        if pattern is None or (text and pattern.search(text)):
            return PYTEST, f"pytest, from the repository's {name}"
    tests = [n for n in names if re.fullmatch(r"test_.*\.py|.*_test\.py", PurePosixPath(n).name)]
    if tests:
        return PYTEST, f"pytest, for the repository's test files ({tests[0]}{', ...' if len(tests) > 1 else ''})"
    return None


def detect_in_git(git_dir: str, commit: str) -> tuple[str, str] | None:
    from ..patches.base import git_reader

    proc = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", "--name-only", *end_of_options(),
                           object_id(commit, "commit")], capture_output=True, text=True, errors="surrogateescape")
    if proc.returncode != 0:
        return None
    return detect([name for name in proc.stdout.split("\0") if name], git_reader(git_dir, commit))


def run_report(sandbox: Sandbox, command: str, timeout: float) -> str:
    """The whole output of `command` run in the sandbox, not only what the sandbox's output cap keeps
    (a big Surefire or jest report): written to a file, read back; the captured output if it cannot be."""
    result = sandbox.run(f"( {command}\n) > {REPORT_FILE} 2>&1", timeout=timeout)
    try:
        return sandbox.read_file(REPORT_FILE, max_bytes=MAX_REPORT).decode("utf-8", errors="replace")
    except OSError:
        return result.output
