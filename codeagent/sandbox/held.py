"""What a container holds on the engine's disk beyond its writable layer.

The engine's SizeRw walks the layer's directory. Two things escape it: a file deleted while a
process keeps it open (its blocks stay taken until the last holder closes it), and the engine's
own files bind-mounted into the container (/etc/hosts, /etc/hostname, /etc/resolv.conf), which
root inside may write. Both are counted from the kernel's view of the container's processes,
which nothing inside the container can change: `HostView` reads the host's /proc when codeagent
runs on the engine's host with the right to (as root, or with rootless Docker); elsewhere (a user
in the docker group, a remote engine) `HelperView` asks a helper container in the host's pid
namespace, which the sandbox can neither see nor signal, running the tools of the sandbox's image,
never the container's files.
"""

from __future__ import annotations

import os
import signal
import stat
import time
from pathlib import Path

from .engine import docker_client
from .errors import SandboxError

MOUNTED_FILES = ("HostsPath", "HostnamePath", "ResolvConfPath")


class HostView:
    """The container's processes (its cgroup's member list) and the engine's files it mounts."""

    def __init__(self, procs_file: Path, mounted_files: list[str], container_id: str = "",
                 freezer: Path | None = None):
        self.procs_file = procs_file
        self.mounted_files = mounted_files
        self.container_id = container_id
        self.freezer = freezer  # v1's freezer.state or v2's cgroup.freeze; None: no freezing from here
        self.init_pid = 0  # the container's init (docker-init), kept by kill_all
        self._tasks_fd: int | None = None

    @classmethod
    def open(cls, container_id: str) -> HostView | None:
        """None when this host cannot see the container's processes (a remote engine, another
        pid namespace, no right to read them)."""
        try:
            info = docker_client().api.inspect_container(container_id)
            pid = int(info["State"]["Pid"])
            procs_file = _procs_file(pid, info["Id"])
            if procs_file is None or pid not in _read_pids(procs_file):
                return None
            os.listdir(f"/proc/{pid}/fd")  # PermissionError without the right to read them
        except Exception:  # no such file or right, an odd answer, or the container is going away
            return None
        view = cls(procs_file, [info[key] for key in MOUNTED_FILES if info.get(key)], info["Id"],
                   _freezer_file(pid, info["Id"]))
        view.init_pid = pid
        return view

    def freeze(self) -> bool:
        """Freeze every process of the container (the cgroup freezer, microseconds; the engine's pause takes
        tens of milliseconds): True once frozen, False where it cannot be (then nothing was changed)."""
        if self.freezer is None:
            return False
        v1 = self.freezer.name == "freezer.state"
        try:
            self.freezer.write_text("FROZEN" if v1 else "1")
            events = self.freezer if v1 else self.freezer.with_name("cgroup.events")
            deadline = time.monotonic() + 0.5  # a task in uninterruptible sleep freezes when it leaves it
            while time.monotonic() < deadline:
                text = events.read_text()
                if (text.strip() == "FROZEN") if v1 else ("frozen 1" in text):
                    return True
                time.sleep(0.001)
            return True  # nearly all of it is: measure anyway, and thaw after
        except OSError:
            return False

    def thaw(self) -> None:
        if self.freezer is not None:
            try:
                self.freezer.write_text("THAWED" if self.freezer.name == "freezer.state" else "0")
            except OSError:
                pass

    def kill_all(self) -> int:
        """SIGKILL every process of the frozen container but its init and main process (the container lives
        on; the shell is started again): frozen, none can exit and leave its pid to another. A pidfd names each
        one, and the process is checked to be the container's before the signal. Returns how many."""
        processes = {pid: _stat_fields(pid) for pid in _read_pids(self.procs_file)}
        processes = {pid: fields for pid, fields in processes.items() if fields}
        if self.init_pid not in processes:  # the container was started again since
            try:
                self.init_pid = int(docker_client().api.inspect_container(self.container_id)["State"]["Pid"])
            except Exception:
                return 0
        children = [(int(fields[19]), pid) for pid, fields in processes.items() if int(fields[1]) == self.init_pid]
        keep = {self.init_pid} | ({min(children)[1]} if children else set())  # main: init's first child
        killed = 0
        for pid in processes.keys() - keep:
            try:
                handle = os.pidfd_open(pid)
            except OSError:
                continue
            try:
                if self.container_id in Path(f"/proc/{pid}/cgroup").read_text():
                    signal.pidfd_send_signal(handle, signal.SIGKILL)
                    killed += 1
            except OSError:
                pass
            finally:
                os.close(handle)
        return killed

    def tasks(self) -> int | None:
        """The cgroup's pids.current: its processes and their threads (what the pids limit counts), at least
        the process count `top` gives; None where it cannot be read. A kept descriptor, one pread each time
        (v1's cgroup.procs sorts a list of the pids at each read)."""
        for _ in range(2):  # once more after a restart of the container made the descriptor stale
            try:
                if self._tasks_fd is None:
                    self._tasks_fd = os.open(self.procs_file.with_name("pids.current"), os.O_RDONLY | os.O_CLOEXEC)
                return int(os.pread(self._tasks_fd, 32, 0))
            except (OSError, ValueError):
                self.close()
        return None

    def close(self) -> None:
        if self._tasks_fd is not None:
            try:
                os.close(self._tasks_fd)
            except OSError:
                pass
            self._tasks_fd = None

    def held(self) -> tuple[int, int]:
        """(bytes of deleted files still open on the container's root filesystem, bytes of the
        engine's files mounted into it)."""
        deleted: dict[tuple[int, int], int] = {}
        root_device = None
        for pid in _read_pids(self.procs_file):
            try:
                root_device = root_device or os.stat(f"/proc/{pid}/root").st_dev
            except OSError:
                continue  # gone meanwhile
            # open descriptors, and mappings of files whose descriptor was closed
            for folder in (f"/proc/{pid}/fd", f"/proc/{pid}/map_files"):
                try:
                    names = os.listdir(folder)
                except OSError:
                    continue
                for name in names:
                    try:
                        info = os.stat(f"{folder}/{name}")  # the open file itself, whatever its name
                    except OSError:
                        continue
                    if stat.S_ISREG(info.st_mode) and info.st_nlink == 0 and info.st_dev == root_device:
                        deleted[(info.st_dev, info.st_ino)] = info.st_blocks * 512
        mounted = 0
        for path in self.mounted_files:
            try:
                mounted += os.stat(path).st_blocks * 512
            except OSError:
                pass
        return sum(deleted.values()), mounted


def _procs_file(pid: int, container_id: str) -> Path | None:
    """The member list of the cgroup that `pid` (the container's first process) is in: v1's pids
    hierarchy, or v2's unified one. It outlives a restart of the container."""
    text = Path(f"/proc/{pid}/cgroup").read_text()
    if container_id not in text:  # not this host's pid: a remote engine, or another namespace
        return None
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        if container_id not in path:
            continue
        for candidate in ((Path("/sys/fs/cgroup/pids") / path.lstrip("/")) if "pids" in controllers.split(",") else None,
                          (Path("/sys/fs/cgroup") / path.lstrip("/")) if controllers == "" else None):
            if candidate is not None and (candidate / "cgroup.procs").is_file():
                return candidate / "cgroup.procs"
    return None


def _freezer_file(pid: int, container_id: str) -> Path | None:
    """v1's freezer.state of the container's freezer cgroup, or v2's cgroup.freeze; None without either."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if container_id not in path:
            continue
        for candidate in ((Path("/sys/fs/cgroup/freezer") / path.lstrip("/") / "freezer.state")
                          if "freezer" in controllers.split(",") else None,
                          (Path("/sys/fs/cgroup") / path.lstrip("/") / "cgroup.freeze") if controllers == "" else None):
            if candidate is not None and candidate.is_file():
                return candidate
    return None


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat after the command's name: state, ppid, ... ([19] the start time); [] when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _read_pids(procs_file: Path) -> list[int]:
    try:
        return [int(line) for line in procs_file.read_text().split()]
    except (OSError, ValueError):
        return []  # the container is stopped (its cgroup is removed until it starts again)


# $1: the container's first process (its init); then every process of it (the engine's `top`).
# Prints the bytes of deleted files they hold on the container's root filesystem, the bytes of
# the engine's files mounted into it, and "end".
HELPER_SCRIPT = r"""
first=$1
root=$(find -L /proc/$first/root -maxdepth 0 -printf %D) || exit 1
for p in "$@"; do
  find -L /proc/$p/fd /proc/$p/map_files -mindepth 1 -maxdepth 1 -type f -links 0 -printf "%D %i %b\n" 2>/dev/null
done | awk -v root="$root" '$1 == root && !seen[$2]++ { sum += $3 } END { printf "%.0f\n", sum * 512 }'
find -L /proc/$first/root/etc/hosts /proc/$first/root/etc/hostname /proc/$first/root/etc/resolv.conf \
  -maxdepth 0 -printf "%b\n" 2>/dev/null | awk '{ sum += $1 } END { printf "%.0f\n", sum * 512 }'
echo end
"""


class HelperView:
    """The same count, from a helper container (`sleep infinity`) with the host's pid namespace."""

    def __init__(self, container_id: str, image: str, labels: dict[str, str]):
        self.container_id = container_id
        self.helper = docker_client().containers.create(
            image, ["sleep", "infinity"], pid_mode="host", network_mode="none", cap_drop=["ALL"],
            cap_add=["SYS_PTRACE", "DAC_READ_SEARCH"], security_opt=["no-new-privileges"], user="0",
            mem_limit="128m", pids_limit=64, labels=labels, init=True)
        try:
            self.helper.start()
            self.held()  # the image has the tools (find -printf, awk)
        except BaseException:
            self.close()
            raise

    def held(self) -> tuple[int, int]:
        client = docker_client()
        rows = client.api.top(self.container_id, ps_args="-o pid").get("Processes") or []
        pids = [str(int(row[0])) for row in rows]
        if not pids:
            return 0, 0  # stopped (restarting)
        code, output = self.helper.exec_run(["sh", "-c", HELPER_SCRIPT, "sh", *pids])
        words = output.decode(errors="replace").split()
        if code != 0 or len(words) != 3 or words[2] != "end" or not (words[0].isdigit() and words[1].isdigit()):
            raise SandboxError(f"the disk measure failed ({code}): {output[-300:]!r}")
        return int(words[0]), int(words[1])

    def close(self) -> None:
        try:
            self.helper.remove(force=True)
        except Exception:
            pass
