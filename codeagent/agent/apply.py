"""Apply a patch to the user's working tree, only when it is safe.

Refuses when a file the patch touches has uncommitted changes, or when the patch does not apply
cleanly: the user's edits are never overwritten. `git apply` is all-or-nothing.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass
class ApplyOutcome:
    applied: bool
    message: str


def touched_files(patch: str) -> list[str]:
    files = []
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            parts = line.split(" ")
            for part in parts[2:4]:
                path = part[2:] if part[:2] in ("a/", "b/") else part
                if path not in files:
                    files.append(path)
    return files


def apply_patch(repo: str | Path, patch: str) -> ApplyOutcome:
    repo = Path(repo)
    if not patch.strip():
        return ApplyOutcome(False, "the patch is empty: nothing to apply")
    files = touched_files(patch)
    status = _git(repo, "status", "--porcelain", "--untracked-files=all", "--", *files)
    if status.returncode != 0:
        return ApplyOutcome(False, f"{repo} is not a git working tree: {status.stderr.strip()}")
    dirty = [line[3:] for line in status.stdout.splitlines() if line.strip()]
    if dirty:
        return ApplyOutcome(False, "not applied: these files have uncommitted changes that the patch would "
                                   f"overwrite: {', '.join(dirty)}. Commit or stash them, then apply the patch file.")
    with tempfile.NamedTemporaryFile("w", suffix=".patch", delete=False) as handle:
        handle.write(patch)
        patch_file = handle.name
    try:
        check = _git(repo, "apply", "--check", "--binary", patch_file)
        if check.returncode != 0:
            return ApplyOutcome(False, f"not applied: the patch does not apply cleanly to {repo}: "
                                       f"{check.stderr.strip()}")
        done = _git(repo, "apply", "--binary", patch_file)
        if done.returncode != 0:
            return ApplyOutcome(False, f"not applied: git apply failed: {done.stderr.strip()}")
    finally:
        Path(patch_file).unlink(missing_ok=True)
    return ApplyOutcome(True, f"applied to {repo}: {', '.join(files)}")


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
