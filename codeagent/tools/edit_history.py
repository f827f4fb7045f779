"""The editor's undo history: the previous contents of each edited file, bounded in count and bytes.

A file is one entry however its path is spelt (`big.txt`, `./big.txt`, `/testbed/big.txt`,
`a/../big.txt`). The host keeps at most MAX_PER_FILE versions of a file and MAX_BYTES in all; the
oldest versions go first, and undo says when a file's history was cut.
"""

from __future__ import annotations

import posixpath
from collections import deque

MAX_PER_FILE = 20
MAX_BYTES = 64 * 1024 * 1024


def file_key(workdir: str, path: str) -> str:
    return posixpath.normpath(posixpath.join(workdir, path))


class EditHistory:
    def __init__(self, max_per_file: int = MAX_PER_FILE, max_bytes: int = MAX_BYTES):
        self.max_per_file, self.max_bytes = max_per_file, max_bytes
        self.bytes = 0  # held in all versions
        self._files: dict[str, list[bytes | None]] = {}  # oldest first; None: the edit created the file
        self._order: deque[str] = deque()  # the key of every version held, oldest first
        self._cut: set[str] = set()  # files that lost versions to the bounds

    def push(self, key: str, previous: bytes | None) -> None:
        self._files.setdefault(key, []).append(previous)
        self._order.append(key)
        self.bytes += len(previous or b"")
        if len(self._files[key]) > self.max_per_file:
            self._order.remove(key)  # its first occurrence is the file's oldest version
            self._drop_oldest(key)
        while self.bytes > self.max_bytes:
            self._drop_oldest(self._order.popleft())

    def pop(self, key: str) -> tuple[bool, bytes | None]:
        """(whether a version was held, that version); the newest first."""
        versions = self._files.get(key)
        if not versions:
            return False, None
        previous = versions.pop()
        for index in range(len(self._order) - 1, -1, -1):  # the newest occurrence of the key
            if self._order[index] == key:
                del self._order[index]
                break
        self.bytes -= len(previous or b"")
        return True, previous

    def was_cut(self, key: str) -> bool:
        return key in self._cut

    def __len__(self) -> int:
        return len(self._order)

    def _drop_oldest(self, key: str) -> None:
        dropped = self._files[key].pop(0)
        self.bytes -= len(dropped or b"")
        self._cut.add(key)
