"""Stopping a mining run at once. On SIGTERM or SIGINT the run's `cancel` event is set, every container this
process made is removed (and removed again as long as the workers wind down: one that a worker starts in
between goes too), and the signal's exception is raised in the main thread as before. The workers see
their containers gone and `cancel` set and end with `Interrupted`; the run records their candidates as
interrupted (validated again by the next run) and writes its files. Without this, the candidate in flight
finished every container run it had left first (minutes; half an hour with Rust) and was not recorded."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

REAP_EVERY = 0.5  # seconds between two sweeps of this process's containers while the workers wind down


def remove_my_containers() -> int:
    """Remove (force) every container this process made: sandboxes, grading runs, layer builds."""
    from ..sandbox.docker import close_all
    from ..sandbox.engine import docker_client
    from ..sandbox.labels import owner_label

    removed = 0
    try:
        containers = docker_client().containers.list(all=True, filters={"label": f"codeagent.owner={owner_label()}"})
    except Exception:  # noqa: BLE001 - no engine: nothing of ours runs
        return 0
    for container in containers:
        try:
            container.remove(force=True)
            removed += 1
        except Exception:  # noqa: BLE001 - gone already
            pass
    close_all()  # their shells and host-side state
    return removed


@contextmanager
def stop_on_signals(cancel: threading.Event) -> Iterator[threading.Event]:
    """Within: SIGTERM and SIGINT set `cancel` and start the sweeps, then raise as they did before
    (SystemExit(128 + signal) and KeyboardInterrupt). Yields the event that ends the sweeps (set on exit)."""
    done = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield done
        return

    def sweep() -> None:
        while not done.is_set():
            remove_my_containers()
            done.wait(REAP_EVERY)

    def handle(signum, frame) -> None:
        if not cancel.is_set():
            cancel.set()
            threading.Thread(target=sweep, name="mine-stop", daemon=True).start()
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    previous = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    for number in previous:
        signal.signal(number, handle)
    try:
        yield done
    finally:
        done.set()
        for number, handler in previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)
        if cancel.is_set():
            remove_my_containers()  # one last sweep: nothing of this run outlives it
            sys.stderr.flush()
