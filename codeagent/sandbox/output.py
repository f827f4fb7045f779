"""Bounded capture of command output: the head and the tail are kept, the middle is counted.

Chunks are kept as they come (a read of the whole chunk is not copied; a slice of one is a view): a
megabyte of output costs one join and one decode, not a copy per step."""

from __future__ import annotations

import sys
from collections import deque

# glibc serves an allocation over 128 KiB (dynamically more) with its own mmap and unmaps it when freed, so
# every megabyte a command prints (the reads, their join, the decoded text) came in fresh pages: their page
# faults cost more than the copies (0.7 of 1.7 ms of CPU for 1 MB, measured). Allocations up to MMAP_BELOW
# are served from the heap instead, and up to TRIM_ABOVE of free memory is kept at its top.
MMAP_BELOW, TRIM_ABOVE = 4 << 20, 16 << 20
_allocator_tuned = False


def _tune_allocator() -> None:
    global _allocator_tuned
    _allocator_tuned = True
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt  # glibc; elsewhere (musl) there is none: nothing to tune
    except (AttributeError, OSError):
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # malloc.h
    mallopt(M_MMAP_THRESHOLD, MMAP_BELOW)
    mallopt(M_TRIM_THRESHOLD, TRIM_ABOVE)


class BoundedOutput:
    def __init__(self, limit_bytes: int):
        if not _allocator_tuned:
            _tune_allocator()
        self.head_limit = limit_bytes // 2
        self.tail_limit = limit_bytes - self.head_limit
        self._head: list[bytes | memoryview] = []
        self._head_size = 0
        self._tail: deque[bytes | memoryview] = deque()
        self._tail_size = 0
        self.total = 0

    def add(self, data: bytes | memoryview) -> None:
        size = len(data)
        if not size:
            return
        self.total += size
        room = self.head_limit - self._head_size
        if room > 0:
            piece = data if size <= room else memoryview(data)[:room]
            self._head.append(piece)
            self._head_size += len(piece)
            if size <= room:
                return
            data = memoryview(data)[room:]
        self._tail.append(data)
        self._tail_size += len(data)
        while self._tail and self._tail_size - len(self._tail[0]) >= self.tail_limit:  # whole chunks out
            self._tail_size -= len(self._tail.popleft())

    @property
    def head(self) -> bytes:
        return b"".join(self._head)

    @property
    def tail(self) -> bytes:
        """The last tail_limit bytes after the head (fewer when there are fewer)."""
        if not self.tail_limit:
            return b""
        return b"".join(self._tail)[-self.tail_limit:]

    @property
    def elided(self) -> int:
        return max(0, self.total - self._head_size - min(self._tail_size, self.tail_limit))

    def text(self) -> str:
        """The output; when its middle was dropped, the cut falls between lines where there are
        lines, and says how many bytes are left out."""
        if not self.elided:
            whole = self._head + list(self._tail)
            data = whole[0] if len(whole) == 1 else b"".join(whole)
            return str(data, "utf-8", errors="replace")
        head, tail = self.head, self.tail
        if b"\n" in head:
            head = head[: head.rindex(b"\n")]
        if b"\n" in tail[:-1]:
            tail = tail[tail.index(b"\n") + 1 :]
        elided = self.total - len(head) - len(tail)
        return (f"{head.decode('utf-8', errors='replace')}\n[... {elided} bytes of output elided ...]\n"
                f"{tail.decode('utf-8', errors='replace')}")


# CPython searches fewer than ~30,000 bytes with a simple loop that crawls a byte at a time through a run of a
# character the phrase holds (spaces: 10x slower than its search of a long block), so reads are looked at in
# blocks of at least this many bytes
WATCH_BLOCK = 1 << 16


class PhraseWatch:
    """Which of a few phrases (ASCII, none holding "_") a command's output holds, looked for in blocks of its
    reads as they come, while the command still writes, rather than in the whole output after it. Every byte
    is looked at, those of an elided middle too; a phrase split between two reads is found."""

    def __init__(self, phrases: tuple[str, ...]):
        self.phrases = {phrase.encode(): phrase for phrase in phrases}
        self._seen: set[str] = set()
        self._keep = max((len(phrase) for phrase in phrases), default=1) - 1
        self._tail = b""  # the last bytes looked at, for a phrase that goes on in the next block
        self._pending: list[bytes] = []
        self._size = 0

    def feed(self, data: bytes, stop: int | None = None) -> None:
        """Look at data[:stop] (now, or with the next bytes)."""
        if not self.phrases:
            return
        piece = data if stop is None or stop >= len(data) else data[:max(stop, 0)]
        if piece:
            self._pending.append(piece)
            self._size += len(piece)
        if self._size >= WATCH_BLOCK:
            self._look()

    @property
    def seen(self) -> set[str]:
        """The phrases found in all that was fed."""
        if self._pending:
            self._look()
        return self._seen

    def _look(self) -> None:
        block = b"".join([self._tail, *self._pending])
        self._pending, self._size = [], 0
        for phrase, text in self.phrases.items():
            # a block without the phrase's first byte (memchr's speed) is not searched for the phrase
            if text not in self._seen and phrase[:1] in block and phrase in block:
                self._seen.add(text)
        self._tail = block[len(block) - self._keep:] if self._keep else b""
