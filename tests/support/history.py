"""A small repository with a history to mine: one commit of each kind the miner tells apart."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TESTS = "from calc import add, mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
FIXED = CALC.replace("return a - b", "return a + b")
FIX_TESTS = TESTS + "\n\ndef test_add():\n    assert add(2, 3) == 5\n"
SUB = FIXED + "\n\ndef sub(a, b):\n    return a - b  # subtract b from a\n"
SUB_TESTS = FIX_TESTS + "\n\ndef test_sub():\n    from calc import sub\n    assert sub(5, 3) == 2\n"
FIX_MESSAGE = "Fix add() (#12)\n\nadd() subtracted its arguments instead of adding them."

# (message, files written (None: removed), the date): oldest first.
COMMITS: list[tuple[str, dict[str, str | bytes | None], str]] = [
    ("calc", {"calc.py": CALC, "tests/test_calc.py": TESTS, "conftest.py": ""}, "2024-01-01T00:00:00Z"),
    (FIX_MESSAGE, {"calc.py": FIXED, "tests/test_calc.py": FIX_TESTS}, "2024-02-01T00:00:00Z"),
    ("Document calc", {"README.md": "# calc\n"}, "2024-03-01T00:00:00Z"),
    ("Comment mul", {"calc.py": FIXED.replace("def mul", "# multiply\ndef mul")}, "2024-04-01T00:00:00Z"),
    ("More tests", {"tests/test_more.py": "def test_one():\n    assert 1\n"}, "2024-05-01T00:00:00Z"),
    ("Add sub: return a - b  # subtract b from a",
     {"calc.py": SUB.replace("def mul", "# multiply\ndef mul"), "tests/test_calc.py": SUB_TESTS}, "2024-06-01T00:00:00Z"),
    ("Logo", {"logo.bin": b"\x00\x01\x02\xff", "tests/test_logo.py": "def test_logo():\n    pass\n"},
     "2024-07-01T00:00:00Z"),
    ("Latin-1", {"names.py": "NAME = '\xe9'\n".encode("latin-1"), "tests/test_names.py": "def test_n():\n    pass\n"},
     "2024-08-01T00:00:00Z"),
    ("Lock", {"poetry.lock": "# lock\n"}, "2024-09-01T00:00:00Z"),
]
REASONS = {  # the subject of each commit after the first -> why it is skipped (None: a candidate)
    "Fix add() (#12)": None,
    "Document calc": "docs-only",
    "Comment mul": "no test change",
    "More tests": "no source change (tests only)",
    "Add sub: return a - b  # subtract b from a": None,  # a candidate; its statement leaks the fix
    "Logo": "binary file changed: logo.bin",
    "Latin-1": "non-UTF-8 patch: names.py",
    "Lock": "lockfile-only",
}


def history_repo(root: Path, commits=COMMITS) -> Path:
    """The repository of `commits` at root/calc (one commit each, their dates as given)."""
    repo = root / "calc"
    repo.mkdir(parents=True)

    def git(*args: str, date: str = "2024-01-01T00:00:00Z") -> str:
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=env).stdout.decode()

    git("init", "-q", "-b", "main")
    for message, files, date in commits:
        for name, content in files.items():
            path = repo / name
            if content is None:
                path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
        git("add", "-A")
        git("commit", "-q", "--no-verify", "-m", message, date=date)
    return repo
