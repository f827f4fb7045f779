"""The watchdog of a local Ray without Ray: a driver process starts it on its private folder and starts a helper
that holds a file open there (as Ray's daemons hold their logs), then is killed with SIGKILL. The helper, in a
session of its own (out of reach of a signal to the driver's group), is stopped all the same, and the folder is
removed; a driver that ends cleanly leaves nothing either. (tests/executors/test_ray_executor.py does it with a real Ray.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from codeagent.private_dirs import owner_alive

DRIVER = """
import subprocess, sys, time
from codeagent.executors import ray_watchdog
from codeagent.private_dirs import make_private_dir

folder = make_private_dir("ray", helpers=True)
watchdog = ray_watchdog.start(folder)
helper = subprocess.Popen(["sh", "-c", 'exec 3>"$1/log"; exec sleep 600', "sh", str(folder)], start_new_session=True)
print(folder, watchdog.pid, helper.pid, flush=True)
time.sleep(float(sys.argv[1]))
"""


def start_driver(seconds: float, tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path), "CODEAGENT_CACHE": str(tmp_path / "cache")}
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(seconds)], stdout=subprocess.PIPE, text=True, env=env)
    folder, watchdog, helper = driver.stdout.readline().split()
    for _ in range(100):  # the helper has its file open
        if any(link.endswith("/log") for link in _links(int(helper))):
            break
        time.sleep(0.05)
    return driver, folder, int(watchdog), int(helper)


def _links(pid: int) -> list[str]:
    try:
        return [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return []


def gone(pid: int) -> bool:
    return not owner_alive(pid)  # a zombie counts as gone


def wait_until(condition, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)
    return condition()


def test_a_driver_killed_with_sigkill_takes_its_helpers_and_folder_along(tmp_path):
    driver, folder, watchdog, helper = start_driver(600, tmp_path)
    try:
        assert not gone(helper) and not gone(watchdog) and os.path.isdir(folder)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        assert wait_until(lambda: gone(helper) and not os.path.exists(folder) and gone(watchdog))
    finally:
        for pid in (helper, watchdog):
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_driver_that_ends_cleanly_leaves_nothing_either(tmp_path):
    driver, folder, watchdog, helper = start_driver(0.5, tmp_path)
    try:
        assert driver.wait(30) == 0
        assert wait_until(lambda: gone(helper) and not os.path.exists(folder) and gone(watchdog))
    finally:
        for pid in (helper, watchdog):
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)
