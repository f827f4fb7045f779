"""Find the source files of a repository worth indexing.

Skips VCS folders, virtual environments, caches, node_modules and build output, files in
languages code navigation does not know, huge files and binary files.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from . import confined
from .languages import supported_extensions, test_file_patterns

SKIP_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", ".env", "virtualenv",
        "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache",
        ".eggs", "site-packages", ".idea", ".vscode", ".gradle", ".next", ".cargo",
    }
)
# Only at the repository root: deeper folders with these names are often real packages.
SKIP_TOP_DIRS = frozenset({"build", "dist", "env", "target", "vendor"})  # target: cargo's and Maven's output
MAX_FILE_BYTES = 1_000_000


def is_skipped_dir(name: str, path: str, top_level: bool = False) -> bool:
    if name in SKIP_DIRS or name.endswith(".egg-info") or (top_level and name in SKIP_TOP_DIRS):
        return True
    # Any virtual environment, whatever its name.
    return os.path.exists(os.path.join(path, "pyvenv.cfg"))


def looks_binary(head: bytes) -> bool:
    return b"\0" in head


def iter_source_files(root: str | Path, max_bytes: int = MAX_FILE_BYTES) -> Iterator[str]:
    """Repo-relative POSIX paths of indexable source files, in a stable (sorted) order.
    Symlinks are never followed, to files or to folders: they may point out of the repository."""
    root = os.fspath(root)
    extensions = supported_extensions()
    for directory, dirnames, filenames in os.walk(root):
        top_level = directory == root
        dirnames[:] = sorted(
            d
            for d in dirnames
            if not os.path.islink(os.path.join(directory, d))
            and not is_skipped_dir(d, os.path.join(directory, d), top_level)
        )
        for filename in sorted(filenames):
            if os.path.splitext(filename)[1].lower() not in extensions:
                continue
            full = os.path.join(directory, filename)
            try:
                status = os.lstat(full)
            except OSError:
                continue
            if not stat.S_ISREG(status.st_mode) or status.st_size > max_bytes:
                continue
            yield os.path.relpath(full, root).replace(os.sep, "/")


def read_source(root: str | Path, relative: str, max_bytes: int = MAX_FILE_BYTES) -> bytes | None:
    """A file's bytes, or None when it is binary, unreadable, too large, a symlink or outside root."""
    try:
        data = confined.read_bytes(root, relative, max_bytes)
    except (OSError, confined.OutsideRoot):
        return None
    return None if looks_binary(data[:8192]) else data


def is_test_path(path: str) -> bool:
    """True for files that hold tests: a name any language's `test_files` patterns match (`test_*.py`,
    `*_test.go`, `*.spec.ts`, `*Test.java`...), or a file under a test folder."""
    parts = path.split("/")
    name = parts[-1]
    if any(fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(name.lower(), pattern)
           for pattern in test_file_patterns()):
        return True
    return any(p.lower() in _TEST_FOLDERS for p in parts[:-1])


_TEST_FOLDERS = frozenset({"test", "tests", "testing", "__tests__"})
