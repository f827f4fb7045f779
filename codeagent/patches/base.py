"""Readers of the base version of a patch's files: `read(path) -> bytes | None` (None: not there).

Paths come from untrusted patches: a reader answers None for any path that would leave its tree.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from ..git_args import end_of_options, object_id
from . import safe_relative

Reader = Callable[[str], "bytes | str | None"]


def tree_reader(root: str | os.PathLike) -> Reader:
    """read(path) over a folder (e.g. codeagent.sandbox.workspace.host_tree(snapshot(repo, commit)))."""
    base = Path(root)

    def read(path: str) -> bytes | None:
        if not safe_relative(path):
            return None
        target = base / path
        return target.read_bytes() if target.is_file() else None

    return read


def git_reader(git_dir: str | os.PathLike, commit: str) -> Reader:
    """read(path) from a git object store at `commit` (a hex object id, or HEAD; no tree extracted)."""
    if commit != "HEAD":  # `{commit}:{path}` then starts with a checked word: never an option
        object_id(commit, "commit")

    def read(path: str) -> bytes | None:
        if not safe_relative(path):
            return None
        proc = subprocess.run(["git", "--git-dir", str(git_dir), "show", *end_of_options(), f"{commit}:{path}"],
                              capture_output=True)
        return proc.stdout if proc.returncode == 0 else None

    return read
