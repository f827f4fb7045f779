"""The sandbox's repository as files on this machine, for tree-sitter navigation.

The base tree's regular files are hard-linked from the cache (made once per tree); files the
agent changed are fetched from the sandbox on each sync. Everything the sandbox says is data:
the paths `git status` prints are checked and every write, link and unlink goes through
`code.confined`, beneath the mirror root only, never through a symlink; file contents come from
the engine's archive stream, capped in size. Synced files replace the link, so the cached base
tree is never modified. A Local sandbox is already on this machine: no mirror.
"""

from __future__ import annotations

import errno
import shlex
import shutil
from pathlib import Path

from ..code import confined
from ..code.files import MAX_FILE_BYTES
from ..private_dirs import make_private_dir, remove_dead_owners
from ..sandbox import tree_cache
from ..sandbox.workspace import host_tree
from .base import ToolContext

# `git` by absolute path and with a clean environment: a shell function or an exported GIT_DIR
# of the agent's shell does not change what runs (the paths are checked all the same).
STATUS_COMMAND = ("/usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root git -C {workdir} "
                  "status --porcelain -z --untracked-files=all --no-renames")
MIRROR_KIND = "mirror"
# What one sync fetches at most (each file is one engine round trip, ~0.1 s): the sandbox can
# change many more files than that (generated files, a flood), and the mirror is on this machine.
MAX_SYNCED_FILES = 200
MAX_SYNCED_BYTES = 32 * 2**20


class WorkspaceMirror:
    def __init__(self, context: ToolContext, max_file_bytes: int = MAX_FILE_BYTES,
                 max_files: int = MAX_SYNCED_FILES, max_bytes: int = MAX_SYNCED_BYTES):
        self.context = context
        self.max_file_bytes = max_file_bytes
        self.max_files, self.max_bytes = max_files, max_bytes
        self.too_large: dict[str, str] = {}  # path -> why it is not in the mirror
        sandbox = context.sandbox
        self._own_root = sandbox.kind != "local"
        if not self._own_root:
            self.root = Path(sandbox.workdir)
            return
        self.base = host_tree(sandbox.snapshot)  # type: ignore[attr-defined]  # every sandbox but the local one has it
        self._held = tree_cache.hold(self.base)  # restores read it as long as the mirror lives
        remove_dead_owners(MIRROR_KIND)
        self.root = make_private_dir(MIRROR_KIND)
        try:
            confined.copy_tree(self.base, self.root, max_file_bytes)
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            self._held.close()
            raise
        self._changed: set[str] = set()

    def sync(self) -> None:
        """Bring the files the agent changed (and undo the ones it reverted)."""
        if not self._own_root:
            return
        command = STATUS_COMMAND.format(workdir=shlex.quote(self.context.sandbox.workdir))
        result = self.context.sandbox.run(f"( {command} )", timeout=120)
        if result.exit_code != 0:
            return  # no trustworthy listing: the mirror stays as it was
        changed: dict[str, str] = {}
        for entry in result.output.split("\0"):
            if len(entry) <= 3:
                continue
            try:
                path = confined.clean_relative(entry[3:])
            except confined.OutsideRoot:  # not a path in the repository: ignored
                continue
            if path == ".git" or path.startswith(".git/"):
                continue
            changed[path] = entry[:2]
        for path in self._changed - set(changed):  # reverted to the base version
            self._restore(path)
        fetched = fetched_bytes = 0
        for path, status in changed.items():
            deleted = "D" in status
            if not deleted and (fetched >= self.max_files or fetched_bytes >= self.max_bytes):
                self._leave_out(path, f"{path} was not mirrored for navigation (more changed files than "
                                      f"{self.max_files:,}, or {self.max_bytes:,} bytes, at once)")
                continue
            if not deleted:
                fetched += 1
            fetched_bytes += self._fetch(path, deleted=deleted)
        self._changed = set(changed)

    def _leave_out(self, path: str, reason: str) -> None:
        self.too_large[path] = reason
        try:
            confined.remove(self.root, path)  # not the base version: it would be stale
        except (confined.OutsideRoot, IsADirectoryError, NotADirectoryError):
            pass

    def _fetch(self, path: str, deleted: bool) -> int:
        """Bring one file; the bytes written."""
        self.too_large.pop(path, None)
        try:
            if deleted:
                confined.remove(self.root, path)
                return 0
            try:
                data = self.context.sandbox.read_file(path, max_bytes=self.max_file_bytes)
            except (FileNotFoundError, IsADirectoryError):  # gone again, a directory or a symlink
                confined.remove(self.root, path)
                return 0
            except OSError as exc:
                if exc.errno != errno.EFBIG:
                    raise
                self.too_large[path] = str(exc.strerror or exc)
                confined.remove(self.root, path)
                return 0
            confined.write_bytes(self.root, path, data)
            return len(data)
        except (confined.OutsideRoot, IsADirectoryError, NotADirectoryError):
            return 0  # e.g. a file whose folder became a file: not mirrored

    def _restore(self, path: str) -> None:
        self.too_large.pop(path, None)
        try:
            if not confined.link(self.base, self.root, path, self.max_file_bytes):
                confined.remove(self.root, path)
        except (confined.OutsideRoot, IsADirectoryError, NotADirectoryError):
            pass

    def close(self) -> None:
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)
            self._held.close()
