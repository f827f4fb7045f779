"""What a container holds on the engine's disk beyond its writable layer, seen from the host.

The engine's SizeRw walks the layer's directory. Two things escape it: a file deleted while a
process keeps it open (its blocks stay taken until the last holder closes it), and the engine's
own files bind-mounted into the container (/etc/hosts, /etc/hostname, /etc/resolv.conf), which
root inside may write. When codeagent runs on the engine's host with the right to read the
container's processes (as root, or with rootless Docker) it counts both through the host's /proc
and the engine's paths: the kernel's view, which nothing inside the container can change. On a
remote engine `HostView.open` returns None and only the layer is counted.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .engine import docker_client

MOUNTED_FILES = ("HostsPath", "HostnamePath", "ResolvConfPath")


class HostView:
    """The container's processes (its cgroup's member list) and the engine's files it mounts."""

    def __init__(self, procs_file: Path, mounted_files: list[str]):
        self.procs_file = procs_file
        self.mounted_files = mounted_files

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
        except (OSError, ValueError, KeyError, TypeError):
            return None
        except Exception:  # the engine's errors: the container is going away
            return None
        return cls(procs_file, [info[key] for key in MOUNTED_FILES if info.get(key)])

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


def _read_pids(procs_file: Path) -> list[int]:
    try:
        return [int(line) for line in procs_file.read_text().split()]
    except (OSError, ValueError):
        return []  # the container is stopped (its cgroup is removed until it starts again)
