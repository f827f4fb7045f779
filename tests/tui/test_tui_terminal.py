"""A smoke run in a real 80x24 terminal: `codeagent solve --example cart` in tmux, keys sent, pane read.

No model is configured, so the example replays its recorded trajectory; its commands run for real
in a Docker sandbox and ask for approval (suggest mode) like any run.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from tests.support.terminal import Pane, close_terminal, new_session, processes_with

pytestmark = [pytest.mark.usefixtures("no_leaks"),
              pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install -y tmux)")]


def test_solve_the_example_in_a_real_terminal(tmp_path):
    name = f"codeagent-tui-{os.getpid()}"
    (tmp_path / "config.yaml").write_text("{}\n")  # no user config: no model, so the example replays
    env = {"CODEAGENT_CONFIG": str(tmp_path / "config.yaml"), "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "traj"),
           "PYTHONPATH": os.getcwd()}
    command = (" ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
               + f" {shlex.quote(sys.executable)} -m codeagent.cli solve --example cart; echo EXIT=$?; sleep 120")
    new_session(name, "env " + command, 80, 24)
    pane = Pane(name)
    try:
        pane.wait_for("Run this command?", "repro.py", "REPLAY")
        pane.keys("y")
        text = pane.wait_for("Edit shop/cart.py?")
        assert "+            del self._lines[sku]" in text  # the dialog shows the edit as a diff
        pane.keys("y")
        pane.wait_for("Run this command?", "python -m pytest")
        pane.keys("y")
        text = pane.wait_for("✓ submitted", "/apply")
        assert "sandbox ready" in text and "step 6" in text
        pane.keys("/diff", "Enter")
        pane.wait_for("Patch against the base commit")
        pane.keys("/quit", "Enter")
        text = pane.wait_for("EXIT=")
        assert "EXIT=0" in text
        # after the TUI: what the session did, its patch, and how to continue it
        assert "6 steps" in text and "Patch: 1 file(s), +4 -0, not applied" in text, text
        run_id = text.split("Resume it: codeagent solve --resume ")[1].split()[0]
        assert (tmp_path / "traj" / f"{run_id}.jsonl").exists() or list((tmp_path / "traj").rglob(f"{run_id}*"))
    finally:
        close_terminal(name, str(tmp_path))


def test_an_approval_and_the_end_of_a_run_ring_the_terminal_bell(tmp_path):
    name = f"codeagent-bell-{os.getpid()}"
    rang = tmp_path / "rang"
    (tmp_path / "config.yaml").write_text("{}\n")
    env = {"CODEAGENT_CONFIG": str(tmp_path / "config.yaml"), "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "traj"),
           "PYTHONPATH": os.getcwd()}
    command = (" ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
               + f" {shlex.quote(sys.executable)} -m codeagent.cli solve --example cart; sleep 120")
    new_session(name, "sleep 1; env " + command)
    # tmux runs its alert-bell hook for each BEL the program writes to the terminal
    subprocess.run(["tmux", "set-hook", "-t", name, "alert-bell", f"run-shell 'echo bell >> {rang}'"], check=True)
    pane = Pane(name)

    def rings() -> int:
        return len(rang.read_text().splitlines()) if rang.exists() else 0

    try:
        text = pane.wait_for("Run this command?", "repro.py")
        assert "waiting for you" in text and "working" not in text.splitlines()[-1], text
        deadline = time.monotonic() + 10
        while rings() < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert rings() >= 1, "no bell for the approval"
        pane.keys("y")
        pane.wait_for("Edit shop/cart.py?")
        pane.keys("y")
        pane.wait_for("Run this command?", "python -m pytest")
        before = rings()
        pane.keys("y")
        pane.wait_for("✓ submitted")
        deadline = time.monotonic() + 10
        while rings() <= before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert rings() > before, "no bell at the end of the run"
        pane.keys("/quit", "Enter")
    finally:
        close_terminal(name, str(tmp_path))


def test_a_closed_terminal_ends_the_tui_and_removes_its_sandbox(tmp_path):
    """The terminal goes away while the agent waits for an approval: the process ends, the sandbox goes."""
    name = f"codeagent-hangup-{os.getpid()}"
    (tmp_path / "config.yaml").write_text("{}\n")
    env = {"CODEAGENT_CONFIG": str(tmp_path / "config.yaml"), "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "traj"),
           "PYTHONPATH": os.getcwd()}
    command = (" ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
               + f" {shlex.quote(sys.executable)} -m codeagent.cli solve --example cart")
    new_session(name, "env " + command, 80, 24)
    try:
        Pane(name).wait_for("Run this command?", "sandbox ready")
        assert processes_with(str(tmp_path))
    finally:
        close_terminal(name, str(tmp_path))
