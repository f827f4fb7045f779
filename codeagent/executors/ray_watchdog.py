"""A local Ray dies with its driver, however the driver ends: kill -9 included.

Ray's daemons, agents and workers outlive a driver that is killed (its `ray.shutdown()` never runs): seen 20 s
after kill -9, `ray::DashboardAgent` and `RuntimeEnvAgent` still listening and the task's sandbox running. So the
driver starts this watchdog first, a process of its own session (a signal to the driver's process group does not
reach it) that waits for the driver to end (a pidfd: woken at once; else its parent changing) and then does
what the next run would: stops every process that holds a file in the local Ray's private folder (all of Ray's
own: each keeps its log there), removes the sandboxes whose owner is dead (the workers just stopped) and the
folder. After a clean exit it finds nothing left to stop.

    python -m codeagent.executors.ray_watchdog DRIVER_PID FOLDER
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path


def start(folder: Path) -> subprocess.Popen:
    """The watchdog of this process (the driver) and its local Ray in `folder`."""
    return subprocess.Popen([sys.executable, "-m", __name__, str(os.getpid()), str(folder)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, close_fds=True, cwd="/")


def wait_for_exit(driver: int) -> None:
    """Return once `driver`, this process's parent when it started, has ended."""
    if os.getppid() != driver:
        return  # gone already: this process was handed to another parent
    handle = None
    if hasattr(os, "pidfd_open"):
        try:
            handle = os.pidfd_open(driver)
        except OSError:
            handle = None
        if handle is not None and os.getppid() != driver:  # it ended before the pidfd named it: not ours
            os.close(handle)
            return
    if handle is not None:
        poller = select.poll()
        poller.register(handle, select.POLLIN)
        poller.poll()  # readable when the process ends
        os.close(handle)
        return
    while os.getppid() == driver:  # no pidfd (an old kernel): the parent changes when it ends
        time.sleep(0.2)


def clean_up(folder: Path) -> None:
    from ..private_dirs import stop_holders

    if folder.is_dir():
        stop_holders(folder)
    try:
        from ..sandbox.prune import remove_sandboxes

        remove_sandboxes()  # of dead owners only: the workers stopped above, and any older orphan
    except Exception:  # no Docker engine now: `sandbox prune` or the next run removes them
        pass
    shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[0].isdigit():
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    wait_for_exit(int(argv[0]))
    clean_up(Path(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
