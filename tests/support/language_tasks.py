"""The small tasks of tests/data/language_tasks/<lang>: a repository laid out and committed with fixed dates
(so that the instance layers built from it are cache hits from one test run to the next)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from tests.support.git import GIT_ENV, git

DATA = Path(__file__).parent.parent / "data"
LANGUAGES = ("go", "rust", "node", "maven", "c")
FIXED_DATE = {"GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def make_base(lang: str, repos: Path) -> tuple[dict, str]:
    """The task's row and its base commit, the repository laid out as repos/owner/name."""
    row = json.loads((DATA / "language_tasks" / lang / "task.jsonl").read_text())
    repo = repos / row["repo"]
    shutil.copytree(DATA / "toolchains" / lang, repo)
    shutil.copytree(DATA / "language_tasks" / lang / "base", repo, dirs_exist_ok=True)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    subprocess.run(["git", "commit", "-q", "-m", "base"], cwd=repo, check=True, env={**os.environ, **GIT_ENV, **FIXED_DATE})
    return row, git(repo, "rev-parse", "HEAD").strip()
