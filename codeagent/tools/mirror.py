"""The sandbox's repository as files on this machine, for tree-sitter navigation.

The base tree is hard-linked from the cache (made once per tree); files the agent changed are
fetched from the sandbox on each sync. Synced files are written by replacing the link, so the
cached base tree is never modified. A Local sandbox is already on this machine: no mirror.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..sandbox.workspace import host_tree
from .base import ToolContext, run_in_repo


class WorkspaceMirror:
    def __init__(self, context: ToolContext):
        self.context = context
        sandbox = context.sandbox
        self._own_root = sandbox.kind != "local"
        if not self._own_root:
            self.root = Path(sandbox.workdir)
            return
        self.base = host_tree(sandbox.snapshot)
        self.root = Path(tempfile.mkdtemp(prefix="codeagent-mirror-"))
        subprocess.run(["cp", "-al", f"{self.base}/.", str(self.root)], check=True, capture_output=True)
        self._changed: set[str] = set()

    def sync(self) -> None:
        """Bring the files the agent changed (and undo the ones it reverted)."""
        if not self._own_root:
            return
        result = run_in_repo(self.context, "git status --porcelain -z --untracked-files=all --no-renames", timeout=120)
        changed = {}
        for entry in result.output.split("\0"):
            if len(entry) > 3:
                changed[entry[3:]] = entry[:2]
        for path in self._changed - set(changed):  # reverted to the base version
            self._restore(path)
        for path, status in changed.items():
            if "D" in status:
                (self.root / path).unlink(missing_ok=True)
                continue
            try:
                data = self.context.sandbox.read_file(path)
            except (FileNotFoundError, IsADirectoryError):
                continue
            self._write(path, data)
        self._changed = set(changed)

    def _write(self, path: str, data: bytes) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.codeagent-sync")
        temporary.write_bytes(data)
        os.replace(temporary, target)

    def _restore(self, path: str) -> None:
        target, original = self.root / path, self.base / path
        target.unlink(missing_ok=True)
        if original.is_file():
            os.link(original, target)

    def close(self) -> None:
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)
