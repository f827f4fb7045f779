"""The small repositories of tests/data/toolchains/<name>, committed as a git repository."""

from __future__ import annotations

import shutil
from pathlib import Path

from .git import git

TOOLCHAIN_REPOS = Path(__file__).parent.parent / "data" / "toolchains"


def toolchain_repo(name: str, tmp_path: Path) -> Path:
    """tests/data/toolchains/<name> copied to tmp_path/<name> and committed."""
    repo = tmp_path / name
    shutil.copytree(TOOLCHAIN_REPOS / name, repo)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    return repo
