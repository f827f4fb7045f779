"""The front every batched engine shares: the callers' requests, one queue, and the worker thread that
answers them (`BatchingFront`). A subclass runs the batches: the transformers engine (models/batching.py)
and TRL's vLLM generator (train/grpo/rollouts.py).

Callers block in `generate` until their turn is done; they get the completion ids exactly as sampled, the
log-probability of each, and whether a stop token ended it (the `Generator` protocol of models/hf.py).
No lock is held across a sequence: the worker is the only thread that touches the model, and callers
only wait on their own request.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

DEFAULT_MAX_BATCH = 32


@dataclass
class Request:
    prompt_ids: list[int]
    max_new_tokens: int
    temperature: float
    top_p: float | None
    seed: int | None
    stop_ids: set[int]
    done: threading.Event = field(default_factory=threading.Event)
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    stopped: bool = False
    error: BaseException | None = None
    reused: int = 0  # prompt tokens whose KV came from the prompt cache (models/batching.py engine)

    def result(self) -> tuple[list[int], list[float], bool]:
        self.done.wait()
        if self.error is not None:
            raise self.error
        return self.ids, self.logprobs, self.stopped


class EngineClosed(RuntimeError):
    pass


class BatchingFront:
    """The queue and the worker thread; `run_batch(requests)` fills in each request's result."""

    def __init__(self, *, max_batch: int = DEFAULT_MAX_BATCH, name: str = "inference"):
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self.max_batch = max_batch
        self.name = name
        self.batch_sizes: list[int] = []  # one entry per batch run (for tests and benchmarks)
        self._queue: queue.Queue[Request | None] = queue.Queue()
        self._closed = False
        self._start_lock = threading.Lock()
        self._worker: threading.Thread | None = None

    def generate(self, prompt_ids, *, max_new_tokens, temperature, top_p, seed, stop_ids):
        if not prompt_ids:
            raise ValueError("generate needs at least one prompt token")
        request = Request(list(prompt_ids), int(max_new_tokens), float(temperature or 0.0), top_p, seed,
                          set(stop_ids))
        if request.max_new_tokens < 1:
            return [], [], False
        self._ensure_worker()
        self._queue.put(request)
        return request.result()

    def close(self) -> None:
        """Stop the worker once the requests already queued are answered; later calls are refused."""
        self._closed = True
        if self._worker is not None:
            self._queue.put(None)
            self._worker.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run_batch(self, requests: list[Request]) -> None:
        raise NotImplementedError

    def _ensure_worker(self) -> None:
        if self._closed:
            raise EngineClosed(f"{self.name}: the inference engine is closed")
        with self._start_lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._loop, name=f"{self.name}-engine", daemon=True)
                self._worker.start()

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                self._fail_waiting()
                return
            batch = [first]
            stop = False
            while len(batch) < self.max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            self.batch_sizes.append(len(batch))
            try:
                self.run_batch(batch)
            except BaseException as error:  # every caller of the batch gets the error, the engine lives on
                log.exception("%s: a batch of %d failed", self.name, len(batch))
                for request in batch:
                    request.error = error
            for request in batch:
                request.done.set()
            if stop:
                self._fail_waiting()
                return

    def _fail_waiting(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                item.error = EngineClosed(f"{self.name}: the inference engine closed before this turn ran")
                item.done.set()
