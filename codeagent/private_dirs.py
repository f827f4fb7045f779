"""This user's own folder for codeagent's host-side temporary files, and per-process folders in it.

The root is `<tmp>/codeagent-<uid>`, mode 0700, checked to be a real directory of this user (never a
shared /tmp name that another user could have planted). Each folder in it is named
`<kind>-<pid>-<random>` after the process that made it, so the folders of a process that died
(kill -9, power loss) can be found and removed by the next run or by `sandbox prune`. A folder
marked with HELPERS_MARK names its owner's helper processes too: any process of this user that holds
a file open in it (a local Ray's daemons and agents, their logs there) is stopped with the folder.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path


def private_root() -> Path:
    root = Path(tempfile.gettempdir()) / f"codeagent-{os.getuid()}"  # beside the cache's disk, not a tmpfs
    try:
        os.mkdir(root, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise PermissionError(f"{root} is not a directory owned by you; remove it and try again")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(root, 0o700)
    return root


def ensure_private(path: Path) -> Path:
    """`path` as a folder only this user can enter (0700): made so, or made so now if it is ours."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.stat(path)
    if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


HELPERS_MARK = ".stop-holders"


def make_private_dir(kind: str, *, helpers: bool = False) -> Path:
    """helpers: the processes that hold files open in the folder die with its owner (see above)."""
    path = Path(tempfile.mkdtemp(prefix=f"{kind}-{os.getpid()}-", dir=private_root()))  # mode 0700
    if helpers:
        (path / HELPERS_MARK).touch()
    return path


def _holds(pid: str, inside: str) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # gone, or not ours to look at
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(inside):
                return True
        except OSError:
            continue
    return False


def stop_holders(folder: Path) -> int:
    """SIGKILL this user's processes that hold a file open under `folder`; how many there were."""
    import signal
    import time

    inside = str(folder.resolve()) + "/"
    killed: set[int] = set()
    for _ in range(3):  # a daemon killed in one pass may have started a process in the meantime
        found = 0
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if entry.stat().st_uid != os.getuid() or not _holds(entry.name, inside):
                    continue
                os.kill(int(entry.name), signal.SIGKILL)  # orphans of a dead owner: nothing to save
                killed.add(int(entry.name))
                found += 1
            except OSError:
                continue
        if not found:
            break
    deadline = time.monotonic() + 5
    while any(owner_alive(pid) for pid in killed) and time.monotonic() < deadline:
        time.sleep(0.05)  # gone before anyone judges what they owned (their sandboxes)
    return len(killed)


def host_identity() -> str:
    """This machine and boot: `hostname/machine-id/boot-id`. A pid means something only beside the same
    three (a Docker engine may be shared by hosts; pids restart with each boot)."""
    import socket

    def first_line(*paths: str) -> str:
        for path in paths:
            try:
                return Path(path).read_text().strip()
            except OSError:
                continue
        return ""

    return "/".join([socket.gethostname(), first_line("/etc/machine-id", "/var/lib/dbus/machine-id"),
                     first_line("/proc/sys/kernel/random/boot_id")])


def owner_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (killed, its parent gone or not reaping) is dead
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


def remove_dead_owners(kind: str | None = None) -> int:
    """Remove the `kind` folders (None: of every kind) whose process is gone; returns how many were removed."""
    removed = 0
    pattern = re.compile(rf"{re.escape(kind) if kind else '[a-z]+'}-(\d+)-.+")
    for path in private_root().iterdir():
        named = pattern.fullmatch(path.name)
        if named and int(named[1]) != os.getpid() and not owner_alive(int(named[1])):
            if (path / HELPERS_MARK).exists():
                stop_holders(path)
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed
