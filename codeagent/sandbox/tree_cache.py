"""The host copies of trees (workspace.host_tree), bounded: least recently used out first.

`<root>/<tree sha>/` is a tree, `<sha>.size` its bytes (written when it was made), `<sha>.lock` the
lock of its users: one that keeps a tree open (navigation's mirror) holds it shared, and eviction
takes it exclusively without waiting, skipping a tree it cannot take. A tree's mtime is its last use.
After each new tree the cache is cut to CODEAGENT_TREE_CACHE_SIZE (default 2g) and trees unused for
CODEAGENT_TREE_CACHE_DAYS (default 14) go; `sandbox prune` clears every tree no one holds.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import time
from pathlib import Path
from typing import IO

DEFAULT_SIZE = 2 * 1024**3
DEFAULT_DAYS = 14.0
RECENT_SECONDS = 600  # a tree used this recently may be in use without a lock (a one-off read): kept
STAGING_GRACE_SECONDS = 6 * 3600  # a staging folder older than this was left by a killed process
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)b?", re.IGNORECASE)


def max_bytes() -> int:
    text = os.environ.get("CODEAGENT_TREE_CACHE_SIZE", "").strip()
    match = _SIZE.fullmatch(text)
    if not match:
        return DEFAULT_SIZE
    return int(float(match[1]) * 1024 ** " kmgt".index(match[2].lower() or " "))


def max_age_seconds() -> float:
    try:
        return float(os.environ.get("CODEAGENT_TREE_CACHE_DAYS", DEFAULT_DAYS)) * 86400
    except ValueError:
        return DEFAULT_DAYS * 86400


def tree_bytes(tree: Path) -> int:
    total = 0
    for folder, _, files in os.walk(tree):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total


def record(tree: Path) -> None:
    """A new tree: note its size."""
    tree.with_name(tree.name + ".size").write_text(str(tree_bytes(tree)))


def touch(tree: Path) -> None:
    try:
        os.utime(tree)
    except OSError:
        pass


def hold(tree: Path) -> IO[str]:
    """Keep `tree` from eviction until the returned handle is closed (or the process ends)."""
    handle = open(tree.with_name(tree.name + ".lock"), "a")
    fcntl.flock(handle, fcntl.LOCK_SH)
    touch(tree)
    return handle


def _size(tree: Path) -> int:
    try:
        return int(tree.with_name(tree.name + ".size").read_text())
    except (OSError, ValueError):  # made before sizes were kept
        record(tree)
        return tree_bytes(tree)


def _remove(tree: Path) -> bool:
    """Remove a tree no one holds; False when one does."""
    with open(tree.with_name(tree.name + ".lock"), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        doomed = tree.with_name(f".evicting-{tree.name}-{os.getpid()}")
        try:
            os.rename(tree, doomed)  # gone at once for a reader; the files go next
        except OSError:
            return False
        tree.with_name(tree.name + ".size").unlink(missing_ok=True)
    shutil.rmtree(doomed, ignore_errors=True)
    return True


def evict(root: Path, *, keep: Path | None = None, limit: int | None = None, max_age: float | None = None,
          now: float | None = None) -> int:
    """Cut the cache to `limit` bytes, least recently used first, and drop trees unused for `max_age`
    seconds; `keep` and trees held or used in the last RECENT_SECONDS stay. Returns how many went."""
    limit = max_bytes() if limit is None else limit
    max_age = max_age_seconds() if max_age is None else max_age
    now = time.time() if now is None else now
    trees = []
    for path in root.iterdir() if root.is_dir() else ():
        if path.name.startswith(".") or not path.is_dir() or path.is_symlink():
            if path.name.startswith((".staging-", ".evicting-")) and now - path.lstat().st_mtime > STAGING_GRACE_SECONDS:
                shutil.rmtree(path, ignore_errors=True)  # left by a process killed while extracting
            continue
        trees.append((path.stat().st_mtime, path))
    sizes = {path: _size(path) for _, path in trees}
    total = sum(sizes.values())
    removed = 0
    for used, path in sorted(trees):
        if total <= limit and now - used <= max_age:
            break  # the rest are newer
        if path == keep or now - used < RECENT_SECONDS:
            continue
        if _remove(path):
            total -= sizes[path]
            removed += 1
    for lock in root.glob("*.lock") if root.is_dir() else ():
        if not lock.with_suffix("").exists():
            lock.unlink(missing_ok=True)
    return removed


def clear(root: Path) -> int:
    """Every tree no one holds or has just used (`sandbox prune`)."""
    return evict(root, limit=0, max_age=0)
