"""What keeps a Docker sandbox usable (mixed into DockerSandbox, sandbox/docker.py): recovery from
runaways (a fork bomb, background jobs that spend the pids limit: every process is killed, the shell
restarted with its cwd and exported variables) and the disk cap where the engine has no quota (DiskWatch,
sandbox/disk.py, measures; here the command or the frozen background writers are stopped, files are kept
and the agent is told)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from . import disk
from .errors import SandboxDead
from .held import HostView
from .protocol import Limits
from .shell import KILL_TREE_SCRIPT, CommandResult, ShellSession

PIDS_NEAR_LIMIT = 0.9
FORK_FAILED = "Resource temporarily unavailable"  # EAGAIN from fork: the pids limit is spent


class DockerRecovery:
    """Runaway recovery and the disk cap of a DockerSandbox, over its container, shell and DiskWatch."""

    container: Any
    shell: ShellSession
    limits: Limits
    _disk: disk.DiskWatch | None
    _disk_cap: int
    _over_disk_cap: bool
    _used_when_capped: int
    _check_open: Callable[[], None]

    def _recover_from_runaways(self, result: CommandResult) -> list[str]:
        """After a fork bomb, or runaway background jobs, nothing can start: kill them all."""
        if not result.timed_out and (counted := self._tasks_from_host()) is not None \
                and counted < 0.5 * self.limits.pids:
            return []  # too few tasks for runaways (top's count can only be lower): the output is not searched
        fork_failed = FORK_FAILED in result.output
        if not (result.timed_out or fork_failed):
            return []
        running = self._processes()  # a fork bomb's count swings as its processes die and respawn
        if running < (0.5 if fork_failed else PIDS_NEAR_LIMIT) * self.limits.pids:
            return []
        self.recover()
        return [self._runaway_note(running)]

    def _runaway_note(self, running: int) -> str:
        return (f"[sandbox] {running} processes were running, near the sandbox's limit of {self.limits.pids} "
                "(a fork bomb or runaway background jobs): every process in the sandbox was killed and the "
                "shell restarted. Files are kept; the working directory and exported variables were restored.")

    def _enforce_disk_cap(self, result: CommandResult, measure: bool) -> list[str]:
        assert self._disk is not None
        notes: list[str] = []
        file_capped = result.exit_code == disk.SIGXFSZ_EXIT or disk.FILE_SIZE_EXCEEDED in result.seen
        if not (measure or file_capped or self._disk.tripped):
            return notes
        # what the watcher's measure found: stopping the processes (and restarting the container,
        # which writes the engine's files anew) may have freed it since
        held, freed = self._disk.take_trip() or (0, 0)
        try:
            used = self._disk.used()
        except Exception:
            return notes
        cap = disk.human(self._disk_cap)
        if file_capped and used < self._disk_cap:
            notes.append(f"[sandbox] A file reached the size limit of {cap} (the sandbox's disk cap) and the "
                         "command writing it was stopped.")
        still_over = used >= self._disk_cap and self._over_disk_cap and used <= self._used_when_capped
        if used >= self._disk_cap and not still_over:
            held, freed = used, self._disk.deleted
            self.recover()  # background writers too
            with contextlib.suppress(Exception):
                used = self._disk.used()
        if held >= self._disk_cap and used < self._disk_cap:  # the shell was restarted, without the limit below
            self._over_disk_cap, self._disk.idle_limit = False, self._disk_cap
            deleted = f", {disk.human(freed)} of it in files deleted while still open" if freed else ""
            notes.append(f"[sandbox] Disk cap reached: the sandbox held {disk.human(held)}{deleted}; the cap is "
                         f"{cap}. Every process in the sandbox was stopped, which freed the space. Files are kept.")
        elif still_over:
            notes.append(f"[sandbox] Still over the disk cap ({disk.human(used)} of {cap}): files cannot grow "
                         "until you delete some.")
        elif used >= self._disk_cap:
            # no file can grow until space is freed; writes fail with EFBIG ("File too large")
            # rather than killing the writer, the shell included
            self.shell.run("trap '' XFSZ; ulimit -S -f 0", timeout=30)
            self._over_disk_cap, self._used_when_capped = True, used
            self._disk.idle_limit = used + 2**20
            notes.append(f"[sandbox] Disk cap reached: the sandbox's files take {disk.human(used)}, the cap is {cap}. "
                         "Every process in the sandbox was stopped and files cannot grow until you delete some "
                         "(build outputs, caches, large generated files). Files are kept.")
        elif self._over_disk_cap:
            self.shell.run('ulimit -S -f "$(ulimit -H -f)"; trap - XFSZ', timeout=30)
            self._over_disk_cap = False
            self._disk.idle_limit = self._disk_cap
            notes.append(f"[sandbox] Back under the disk cap ({disk.human(used)} of {cap}): files can grow again.")
        return notes

    def _stop_command(self) -> None:
        """Kill the running command and the shell itself (the command may be a loop in the shell);
        the shell is then restarted. Called from DiskWatch's thread."""
        pid = self.shell.pid
        if not pid:
            return
        try:
            self.container.exec_run(["kill", "-STOP", str(pid)])
            self._kill_children(pid)
            self.container.exec_run(["kill", "-KILL", str(pid)])
        except Exception:
            pass

    @contextlib.contextmanager
    def _held(self):
        """The sandbox's own work in its container: DiskWatch does not freeze it meanwhile."""
        if self._disk is None:
            yield
            return
        self._disk.hold()
        try:
            self._check_open()  # frozen just before: stopped now
            yield
        finally:
            self._disk.settled()

    def _freeze(self) -> None:
        """Freeze every process of the sandbox (background writers over the disk cap while no
        command runs). Called from DiskWatch's thread; the next run() stops them."""
        try:
            self.container.pause()
        except Exception:
            pass

    def _unfreeze_and_recover(self) -> None:
        try:
            self.container.unpause()
        except Exception:
            pass
        self.recover()

    def _tasks_from_host(self) -> int | None:
        """The container's processes and threads (at least `top`'s count) from its cgroup, read on this host in
        microseconds; None where this host cannot see it (then only the engine's `top` can)."""
        view = self._disk.view if self._disk is not None else None
        return view.tasks() if isinstance(view, HostView) else None

    def _processes(self) -> int:
        try:
            return len(self.container.top().get("Processes") or [])
        except Exception:
            return 0

    def recover(self) -> None:
        """Kill every process in the sandbox and start a new shell (cwd and exported variables
        restored); the files are kept. For a sandbox that a runaway made unusable."""
        self._check_open()
        for attempt in (1, 2):  # a runaway can outlive one reset (the engine's kill timed out): a second one
            self._hard_reset()
            self.shell.close()
            try:
                self.shell.start(restore=True)
                return
            except SandboxDead:
                if attempt == 2:
                    raise

    def _kill_children(self, pid: int, itself: bool = False) -> bool:
        """Kill the shell's process tree (`itself`: the shell too); False (so the caller resets the whole
        container) when the pids limit is nearly spent: orphaned runaways, like a fork bomb's, are not in it."""
        try:
            if self._processes() >= PIDS_NEAR_LIMIT * self.limits.pids:
                return False
            code, _ = self.container.exec_run(["sh", "-c", KILL_TREE_SCRIPT, "sh", str(pid),
                                               "itself" if itself else ""])
            return code == 0
        except Exception:
            return False

    def _hard_reset(self) -> None:
        """Kill every process in the container and start it again; files in it survive."""
        try:
            self.container.kill()
        except Exception:
            pass
        try:
            self.container.start()
        except Exception as exc:
            raise SandboxDead(f"the sandbox container could not be restarted: {exc}") from exc
