"""The disk watch's trips, without a container: a measure that began before the sandbox acted on a trip (stopped
every process, restarted the shell) is stale when it ends, and acting on it would kill the next command, whose
processes hold nothing. Seen in CI: the command after "Disk cap reached" came back empty, its shell killed."""

from __future__ import annotations

import threading

from codeagent.sandbox import disk

CAP = 64 * 2**20


def _watch(measured: list[int], stops: list[str]) -> disk.DiskWatch:
    watch = object.__new__(disk.DiskWatch)  # its threads and the engine left out
    watch.cap, watch.view, watch.deleted = CAP, None, 0
    watch.tripped = watch.idle_tripped = False
    watch.tripped_used = watch.tripped_deleted = 0
    watch._trip_lock, watch.epoch = threading.Lock(), 0
    watch._over_cap = lambda: stops.append("stopped")
    watch.used = lambda: measured.pop(0)
    return watch


def test_a_measure_over_the_cap_trips_and_the_sandbox_takes_what_it_found():
    stops: list[str] = []
    watch = _watch([CAP + 5], stops)
    watch._check_running(CAP, freeze=False)
    assert stops == ["stopped"]
    assert watch.take_trip() == (CAP + 5, 0)
    assert watch.take_trip() is None  # taken once


def test_a_measure_begun_before_the_sandbox_acted_on_a_trip_stops_nothing():
    stops: list[str] = []
    watch = _watch([CAP + 5], stops)
    began, acted = threading.Event(), threading.Event()

    def frozen(freeze: bool) -> bool:  # the measure has begun; the sandbox acts on an earlier trip meanwhile
        began.set()
        acted.wait(5)
        return False

    watch._frozen = frozen
    measuring = threading.Thread(target=watch._check_running, args=(CAP, False))
    measuring.start()
    began.wait(5)
    assert watch.take_trip() is None  # the earlier trip, acted on by the sandbox
    acted.set()
    measuring.join(5)
    assert stops == [] and not watch.tripped


def test_the_sandbox_waits_for_a_measure_in_flight_before_it_takes_the_trip():
    stops: list[str] = []
    watch = _watch([], stops)
    measuring, release = threading.Event(), threading.Event()

    def slow_measure() -> int:
        measuring.set()
        release.wait(5)
        return CAP * 2

    watch.used = slow_measure
    thread = threading.Thread(target=watch._check_running, args=(CAP, False))
    thread.start()
    measuring.wait(5)
    taken: list = []
    taker = threading.Thread(target=lambda: taken.append(watch.take_trip()))
    taker.start()
    taker.join(0.2)
    assert taker.is_alive()  # not before the measure is done: its stop comes first, then the sandbox sees it
    release.set()
    thread.join(5)
    taker.join(5)
    assert stops == ["stopped"] and taken == [(CAP * 2, 0)]
