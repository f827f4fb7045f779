"""Per-process folders: those of a dead owner go, and with a folder marked for it, the helper processes
that still hold files in it (a local Ray's agents outlive a killed driver) are stopped first."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from codeagent.private_dirs import make_private_dir, private_root, remove_dead_owners

HOLDER = "import sys, time; f = open(sys.argv[1], 'w'); print('holding', flush=True); time.sleep(600)"


def _dead_pid() -> int:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    return gone.pid


def test_the_helpers_of_a_dead_owner_are_stopped_with_its_folder():
    marked = make_private_dir("ray", helpers=True)
    plain = make_private_dir("ray")
    dead = _dead_pid()
    folders = [private_root() / name.name.replace(f"-{os.getpid()}-", f"-{dead}-", 1) for name in (marked, plain)]
    for old, new in zip((marked, plain), folders):
        os.rename(old, new)
    holders = [subprocess.Popen([sys.executable, "-c", HOLDER, str(folder / "log")], stdout=subprocess.PIPE, text=True)
               for folder in folders]
    try:
        assert all(holder.stdout.readline() == "holding\n" for holder in holders)
        assert remove_dead_owners("ray") >= 2
        assert not any(folder.exists() for folder in folders)
        assert holders[0].wait(timeout=30) == -9  # the marked folder's helper
        time.sleep(0.2)
        assert holders[1].poll() is None  # a plain folder's holder is not its owner's helper: left alone
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()


def test_a_live_owners_folder_and_its_helpers_stay():
    folder = make_private_dir("ray", helpers=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder / "log")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "holding\n"
        remove_dead_owners()
        assert folder.is_dir() and holder.poll() is None
    finally:
        holder.kill()
        holder.wait()
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
