"""A disk cap per sandbox container, enforced where the engine cannot do it.

With a quota-capable storage driver (overlay2 on xfs with pquota, btrfs, zfs...) the engine's
`--storage-opt size=` does it. Elsewhere (overlay2 on ext4, the common case) codeagent caps every
file at the cap with RLIMIT_FSIZE and measures the container's writable layer (the engine's
`SizeRw`) from time to time: after commands once their running time since the last measure adds
up to `interval` (a fast command cannot write much), and every `interval` while one runs. The
measure costs ~1 ms on a small layer and grows with the file count, so the interval grows with
it (from MIN_INTERVAL): the check stays a small fraction of the commands' own time. Between
commands the layer is measured every interval too: a background job (`writer &`) keeps writing
while no command runs; over the cap, every process is frozen (`idle_over_cap`) until the next
command stops them. What the layer's size misses (files deleted while still open, the engine's
files mounted into the container) is added from the kernel's view of the container (held.py).

Where codeagent runs on the engine's host with the right to read it (HostView), writing is also
watched every PROBE_INTERVAL by the free space of the filesystem that holds the layer (a statvfs,
microseconds): the container cannot have grown since the last measure by more than that space
shrank, whatever it wrote (files deleted while open included). When that bound reaches the cap the
container is frozen (its cgroup's freezer), measured, and over the cap its processes are killed
while frozen: what it writes past the cap is about one PROBE_INTERVAL of writing, not one interval
(bench/disk_overshoot.py). Other writers on the host only make the bound cautious (an early
measure). Elsewhere (a helper container counts what is held) the interval alone bounds it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from .engine import docker_client
from .errors import SandboxError
from .held import HelperView, HostView

MIN_INTERVAL = 0.5  # seconds of command time between measures
PROBE_INTERVAL: float | None = 0.05  # seconds between looks at the free space (None: no probe, the interval only)
SIGXFSZ_EXIT = 128 + 25
# What a shell says of a process the file size limit killed, and a write the engine's quota refused: looked for
# in each command's output as it comes (ShellSession's watch, CommandResult.seen)
FILE_SIZE_EXCEEDED = "File size limit exceeded"
NO_SPACE = "No space left on device"

_quota_supported: bool | None = None  # learnt from the engine on the first sandbox
log = logging.getLogger(__name__)


def parse_size(text: str | int) -> int:
    from docker.errors import DockerException
    from docker.utils import parse_bytes

    try:
        size = int(text) if isinstance(text, int) else int(parse_bytes(str(text)))
    except (DockerException, ValueError):
        size = 0
    if size <= 0:
        raise SandboxError(f"sandbox.disk must be a size such as 4g or 512m, not {text!r}")
    return size


def quota_options(cap: int) -> list[dict]:
    """Container options to try in order: the engine's quota when it may have one, then the
    fallback (RLIMIT_FSIZE on every process; the layer is measured by DiskWatch)."""
    from docker.types import Ulimit

    fallback = {"ulimits": [Ulimit(name="fsize", soft=cap, hard=cap)]}
    if _quota_supported is False:
        return [fallback]
    return [{"storage_opt": {"size": str(cap)}, **fallback}, fallback]


def learn_quota_support(used_quota: bool) -> None:
    global _quota_supported
    _quota_supported = used_quota


def is_quota_refusal(exc: Exception) -> bool:
    text = str(exc).lower()
    return "storage-opt" in text or "storage opt" in text or "quota" in text


def human(size: int) -> str:
    return f"{size / 2**30:.2f} GiB" if size >= 2**30 else f"{size / 2**20:.1f} MiB"


class FreeSpace:
    """The free space of the filesystem that holds a container's writable layer, and its value at the start
    of the last measure: what the container can have written since is at most the difference."""

    def __init__(self, path: str):
        self.path = path
        self.baseline = self.free()

    @classmethod
    def open(cls, container_id: str) -> FreeSpace | None:
        """None where the layer is not a folder this process may stat (a remote engine, no right to it)."""
        try:
            data = docker_client().api.inspect_container(container_id)["GraphDriver"]["Data"] or {}
            return cls(data["UpperDir"])
        except Exception:
            return None

    def free(self) -> int:
        info = os.statvfs(self.path)
        return info.f_bfree * info.f_frsize

    def shrunk(self) -> int:
        return self.baseline - self.free()


class DiskWatch:
    """Measures a container's writable layer; `over_cap` is called (from a watcher thread) when
    a running command takes it over the cap."""

    def __init__(self, container_id: str, cap: int, over_cap: Callable[[], None],
                 idle_over_cap: Callable[[], None] | None = None, *, image: str, labels: dict[str, str]):
        self.container_id = container_id
        self.cap = cap
        self.interval = MIN_INTERVAL
        self.unmeasured = 0.0  # command seconds since the last measure
        self.tripped = False  # the watcher found the cap exceeded during a command
        self.idle_tripped = False  # ... or between commands (idle_over_cap was called)
        self._over_cap = over_cap
        self._idle_over_cap = idle_over_cap
        self._lock = threading.Lock()  # no command starts while an idle measure may freeze the sandbox
        # a measure begun before the sandbox acted on a trip is stale once it ends: acting on it would stop
        # the next command, whose processes hold nothing (the epoch counts the trips acted on)
        self._trip_lock = threading.Lock()
        self.epoch = 0
        self.idle_limit = cap  # over the cap already (files kept): only growth past this trips
        self.deleted = 0  # of the last measure: bytes of files deleted while open
        self.tripped_used = self.tripped_deleted = 0  # the measure that tripped (stopping may free it)
        self.view: HostView | HelperView | None = HostView.open(container_id)
        if self.view is None:
            try:
                self.view = HelperView(container_id, image, labels)
            except Exception as exc:
                log.warning("the sandbox's disk cap counts its writable layer only: no helper container could "
                            "count files deleted while held open (%s)", str(exc)[:300])
        self._busy = 0  # the sandbox's own work (command_started or hold, to settled) is never frozen
        self._running_since: float | None = None
        self.space = FreeSpace.open(container_id) if PROBE_INTERVAL and isinstance(self.view, HostView) else None
        self.last_used = 0
        self._measured_at = time.monotonic()
        if self.space is not None:
            self.used()  # the starting point of the probe's bound
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="codeagent-disk-watch", daemon=True)
        self._thread.start()

    def used(self) -> int:
        started = time.monotonic()
        free = self.space.free() if self.space is not None else 0  # before: what is written meanwhile counts next
        rows = docker_client().api.containers(all=True, size=True, filters={"id": self.container_id})
        layer = int(rows[0].get("SizeRw") or 0) if rows else 0
        try:
            self.deleted, mounted = self.view.held() if self.view is not None else (0, 0)
        except Exception:  # the container is restarting: its layer still counts
            self.deleted, mounted = 0, 0
        self.interval = max(MIN_INTERVAL, 20 * (time.monotonic() - started))
        self.unmeasured = 0.0
        self.last_used, self._measured_at = layer + self.deleted + mounted, time.monotonic()
        if self.space is not None:
            self.space.baseline = free
        return self.last_used

    def may_be_over(self, limit: int) -> bool:
        """The probe's bound: the last measure plus what the free space shrank by since reaches `limit`."""
        try:
            return self.space is not None and self.last_used + self.space.shrunk() >= limit
        except OSError:
            return False

    def command_started(self) -> None:
        self.hold()
        self._running_since = time.monotonic()

    def hold(self) -> None:
        """The sandbox works in its container (a file written, the diff): not to be frozen."""
        with self._lock:
            self._busy += 1

    def settled(self) -> None:
        """The work begun by command_started or hold is done: idle measures may freeze it again."""
        with self._lock:
            self._busy -= 1

    def command_ended(self, seconds: float) -> bool:
        """True when the layer should be measured now."""
        self._running_since = None
        self.unmeasured += seconds
        return self.tripped or self.unmeasured >= self.interval

    def _watch(self) -> None:
        while not self._stop.wait(PROBE_INTERVAL if self.space is not None else self.interval):
            since = self._running_since
            if self.tripped or self.idle_tripped:
                continue
            # without the probe each wake is an interval; with it, the interval's measure comes as before
            due = self.space is None or time.monotonic() - self._measured_at >= self.interval
            if since is None:
                if self._idle_over_cap is not None and not self._busy:
                    urgent = self.may_be_over(max(self.cap, self.idle_limit))
                    if urgent or due:
                        self._check_idle(urgent)
                continue
            # files kept over the cap (idle_limit above it): only growth past them is urgent, not a command that
            # deletes some; the interval's measure still holds any command to the cap
            limit = max(self.cap, self.idle_limit)
            if self.may_be_over(limit):
                self._check_running(limit, freeze=True)
            elif due and time.monotonic() - since >= self.interval:
                self._check_running(self.cap, freeze=False)

    def _frozen(self, freeze: bool) -> bool:
        return freeze and isinstance(self.view, HostView) and self.view.freeze()

    def take_trip(self) -> tuple[int, int] | None:
        """The sandbox acts on the watcher's trip: what the tripping measure found (None: no trip), and every
        measure begun before now is stale."""
        with self._trip_lock:
            self.epoch += 1
            found = (self.tripped_used, self.tripped_deleted) if self.tripped else None
            self.tripped = False
            return found

    def _check_running(self, limit: int, freeze: bool) -> None:
        epoch = self.epoch
        frozen = self._frozen(freeze)  # nothing writes between the measure and the stop
        with self._trip_lock:
            try:
                if (used := self.used()) >= limit and epoch == self.epoch:
                    self.tripped_used, self.tripped_deleted = used, self.deleted
                    self.tripped = True
                    if frozen:
                        assert isinstance(self.view, HostView)
                        self.view.kill_all()  # dies as it thaws; the shell too, started again by the sandbox
            except Exception:
                pass  # the container is going away; the next command's check reports it
            finally:
                if frozen:
                    assert isinstance(self.view, HostView)
                    self.view.thaw()
            if self.tripped and epoch == self.epoch:
                self._over_cap()

    def _check_idle(self, freeze: bool) -> None:
        with self._lock:
            if self._busy:
                return
            frozen = self._frozen(freeze)
            over = False
            try:
                if (used := self.used()) >= max(self.cap, self.idle_limit):
                    self.tripped_used, self.tripped_deleted = used, self.deleted
                    over = True
                    if frozen:
                        assert isinstance(self.view, HostView)
                        self.view.kill_all()
            except Exception:
                pass
            finally:
                if frozen:
                    assert isinstance(self.view, HostView)
                    self.view.thaw()
            if over:
                assert self._idle_over_cap is not None  # _watch checks it before calling
                self._idle_over_cap()  # frozen before anyone can see the flag and unfreeze
                self.tripped = self.idle_tripped = True

    def close(self) -> None:
        self._stop.set()
        if self.view is not None:
            self.view.close()  # the helper container, or the host view's descriptor
