"""The prompt (KV) cache of the batched engine (models/batching.py): the KV of finished turns, kept for
the next turn of the same conversation, which extends their ids.

The next turn's prompt takes the KV of the longest cached prefix and only the new suffix is prefilled. A
prompt that shares less than `min_reuse` tokens with every entry (a history that was rewritten) is
prefilled in full. An entry is dropped when the next turn continues it, when its conversation ends
(`release`, called by rollouts at the end of a run), when the bounds (bytes, entries; least recently used
out) evict it, and when the engine closes: the KV belongs to the weights it was computed with.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine_front import Request

DEFAULT_KV_CACHE_BYTES = 2 << 30  # the prompt cache: at most 2 GiB of KV ...
DEFAULT_KV_CACHE_ENTRIES = 256  # ... and 256 conversations
DEFAULT_MIN_REUSE = 8  # a shorter shared prefix is prefilled again


@dataclass
class CacheEntry:
    ids: list[int]
    layers: list[tuple[Any, Any]]  # per layer (keys, values), 1 x heads x len(ids) x dim
    nbytes: int

    def consumed_by(self, requests: list[Request]) -> bool:
        """A turn continues this whole conversation: the turn's own entry will supersede it."""
        return any(len(r.prompt_ids) > len(self.ids) and r.prompt_ids[:len(self.ids)] == self.ids for r in requests)


class PrefixCache:
    """The KV of finished turns (prompt + completion ids, as fed), for the next turn of the same
    conversation, which extends them: least recently used first out, bounded by bytes and by entries.
    An entry is dropped when a later turn continues it (that turn's entry covers it), when its
    conversation ends (`release`), or when the bounds evict it."""

    def __init__(self, max_bytes: int, max_entries: int, min_reuse: int):
        self.max_bytes, self.max_entries, self.min_reuse = int(max_bytes), int(max_entries), max(1, int(min_reuse))
        self.bytes = 0
        self.evicted = 0
        self._entries: OrderedDict[int, CacheEntry] = OrderedDict()
        self._lock = threading.Lock()  # `release` comes from the callers' threads

    def __len__(self) -> int:
        return len(self._entries)

    def wants(self, ids: list[int]) -> bool:
        return self.max_bytes > 0 and self.max_entries > 0 and len(ids) >= self.min_reuse

    def lookup(self, prompt: list[int]) -> tuple[CacheEntry | None, int]:
        """The entry sharing the longest prefix with `prompt`, and how many tokens of it to reuse (at least
        one prompt token is always left to prefill: its logits start the completion)."""
        best, best_n = None, 0
        with self._lock:
            for key, entry in self._entries.items():
                n = min(common_prefix(entry.ids, prompt), len(prompt) - 1)
                if n > best_n:
                    best, best_n, best_key = entry, n, key
            if best is None or best_n < self.min_reuse:
                return None, 0
            self._entries.move_to_end(best_key)
        return best, best_n

    def add(self, ids: list[int], layers) -> None:
        nbytes = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
        if nbytes > self.max_bytes:
            return
        with self._lock:
            self._entries[id(layers)] = CacheEntry(ids, layers, nbytes)
            self.bytes += nbytes
            while self.bytes > self.max_bytes or len(self._entries) > self.max_entries:
                _, old = self._entries.popitem(last=False)
                self.bytes -= old.nbytes
                self.evicted += 1

    def discard(self, entry: CacheEntry) -> None:
        with self._lock:
            for key, value in list(self._entries.items()):
                if value is entry:
                    del self._entries[key]
                    self.bytes -= entry.nbytes

    def release(self, ids: list[int]) -> None:
        """Drop the entries of a conversation that ended with `ids` (those that are a prefix of it)."""
        with self._lock:
            for key, entry in list(self._entries.items()):
                if len(entry.ids) <= len(ids) and ids[:len(entry.ids)] == entry.ids:
                    del self._entries[key]
                    self.bytes -= entry.nbytes

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix (slice comparisons run in C; a bisection over them)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # a[:low] == b[:low], a[:high] != b[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle
    return low
