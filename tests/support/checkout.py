"""A checkout with a Latin-1 file, and the patches a change to it makes (tests of patches as bytes)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from codeagent import patches
from tests.support.git import git

LATIN1 = "café crème\n".encode("latin-1")
LATIN1_EDIT = "café brûlée\n".encode("latin-1")


def latin1_checkout(tmp_path: Path) -> Path:
    """A git checkout with a Latin-1 file and a small program."""
    repo = tmp_path / "checkout"
    repo.mkdir()
    (repo / "menu.txt").write_bytes(LATIN1)
    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text("print('hi')\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    return repo


def diff_of(checkout, change) -> str:
    """The patch a change makes to a throwaway copy of the checkout."""
    copy = checkout.parent / f"copy-{len(os.listdir(checkout.parent))}"
    subprocess.run(["git", "clone", "-q", str(checkout), str(copy)], check=True)
    change(copy)
    git(copy, "add", "-A")
    return patches.decode(subprocess.run(["git", "diff", "--cached", "--binary"], cwd=copy, capture_output=True,
                                         check=True).stdout)
