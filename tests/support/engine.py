"""Holding an inference engine's first batch at a gate, so that a test sees what queues meanwhile."""

from __future__ import annotations

import threading


def gated(engine):
    """The engine's first batch waits at a gate: what is queued meanwhile forms the next batch."""
    entered, gate = threading.Event(), threading.Event()
    method = "admit" if hasattr(engine, "admit") else "run_batch"  # the transformers engine admits rows
    run = getattr(engine, method)

    def run_batch(requests):
        if not entered.is_set():
            entered.set()
            gate.wait()
        run(requests)

    setattr(engine, method, run_batch)
    return entered, gate
