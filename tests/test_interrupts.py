"""Ctrl-C at any moment of a real `codeagent` process's start-up exits 130 with "interrupted", and never
hangs (issue 35, item 4). A Ctrl-C that lands inside importlib's own code (its module lock's weakref
callback, right after it took the global import lock) was "ignored" and left that lock held: the next import
in another thread (the model check's) waited forever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support.fake_server import FakeServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Made deterministic: a profile function sends SIGINT the moment importlib's lock callback has taken the
# global import lock (its first call), then the real CLI goes on with a model whose check imports in a thread.
LAUNCH = """
import signal, sys

def profile(frame, event, arg):
    if event == "c_return" and frame.f_code.co_name == "cb" and "importlib" in frame.f_code.co_filename \\
            and getattr(arg, "__name__", "") == "acquire_lock":
        sys.setprofile(None)
        signal.raise_signal(signal.SIGINT)

sys.argv = ["codeagent", *sys.argv[1:]]
from codeagent.cli import main
sys.setprofile(profile)
main()
"""


@pytest.fixture
def server():
    fake = FakeServer()
    fake.replies += [FakeServer.HANG] * 4  # a model that thinks for as long as the test lasts
    yield fake
    fake.close()


def solve_command(server, repo) -> list[str]:
    return ["solve", "--headless", "--repo", str(repo), "--issue", "why?", "--model", "openai/test-model",
            "--api-base", server.base, "--set", "agent.localize=false"]


def finished(proc: subprocess.Popen, timeout: float) -> tuple[int | None, str]:
    """The exit code (None: still running after `timeout`, then killed) and stderr."""
    try:
        _, err = proc.communicate(timeout=timeout)
        return proc.returncode, err
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        return None, err


def test_a_ctrl_c_inside_importlibs_lock_callback_neither_hangs_nor_is_lost(server, repo, env, tmp_path):
    (tmp_path / "launch.py").write_text(LAUNCH)
    proc = subprocess.Popen([sys.executable, str(tmp_path / "launch.py"), *solve_command(server, repo)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**env, "PYTHONPATH": ROOT})
    code, err = finished(proc, timeout=60)
    assert code == 130, f"exit {code} (None: hung)\n{err}"
    assert "interrupted" in err and "Exception ignored" not in err and "Traceback" not in err, err


@pytest.mark.usefixtures("no_leaks")
def test_ctrl_c_at_many_points_of_the_start_up_exits_130(server, repo, env):
    """A real `python -m codeagent.cli solve --headless`, SIGINT at 12 points from 0.1 s to 3 s after launch
    (imports, the model check, the working tree's snapshot, the sandbox's start, the first request)."""
    seen = []
    for delay in [0.1 + index * 0.26 for index in range(12)]:
        proc = subprocess.Popen([sys.executable, "-m", "codeagent.cli", *solve_command(server, repo)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**env, "PYTHONPATH": ROOT})
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        code, err = finished(proc, timeout=60)
        seen.append((round(delay, 2), code))
        assert code == 130, f"SIGINT at {delay:.2f} s: exit {code} (None: hung)\n{err}"
        assert "Exception ignored" not in err and "Traceback" not in err, err
    assert len(seen) == 12
