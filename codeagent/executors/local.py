"""Work on worker processes (or threads) of this machine. Batch code only needs `map_unordered`; a
distributed engine (Ray: ray_executor.py) plugs in by implementing it, with no change to that code.
"""

from __future__ import annotations

import multiprocessing
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from typing import Any, Protocol


class Executor(Protocol):
    def map_unordered(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[tuple[Any, Any, BaseException | None]]:
        """Yield (item, result, error) as each item finishes; an error never stops the others."""
        ...


class LocalExecutor:
    """Worker processes on this machine (threads with `threads=True`, e.g. for tests)."""

    def __init__(self, workers: int = 1, threads: bool = False):
        self.workers = max(1, workers)
        self.threads = threads

    def map_unordered(self, fn, items):
        if self.threads:
            pool = ThreadPoolExecutor(self.workers)
        else:  # spawn: the Docker client and its sockets are not fork-safe
            pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_worker_init)
        pending: dict[Future, Any] = {}
        queue = iter(items)
        try:
            for item in queue:
                pending[pool.submit(fn, item)] = item
                if len(pending) >= self.workers:
                    break
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    item = pending.pop(future)
                    error = future.exception()
                    yield item, (None if error else future.result()), error
                    following = next(queue, None)
                    if following is not None:
                        pending[pool.submit(fn, following)] = following
        finally:
            for future in pending:
                future.cancel()
            pool.shutdown(wait=True, cancel_futures=True)


def _worker_init() -> None:
    """Workers die with the parent (even on kill -9), and die cleanly: SIGTERM unwinds the stack so
    sandboxes are removed."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    if sys.platform == "linux":
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
