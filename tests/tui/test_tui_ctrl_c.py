"""Ctrl-C twice in the TUI, in a real terminal (tmux): exit 130 (not 0), with what the session did and the
command that continues it; during the start-up (the sandbox still being prepared, no trajectory yet), the
issue is kept and the line that starts it again is printed. /quit stays 0 (test_tui_terminal.py)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import time

import pytest

from tests.support.fake_server import FakeServer
from tests.support.terminal import Pane, close_terminal, new_session

pytestmark = [pytest.mark.usefixtures("no_leaks"),
              pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install -y tmux)")]

ISSUE = "The total is off by one for carts with a single line."


def start(tmp_path, name: str, *flags: str) -> Pane:
    (tmp_path / "config.yaml").write_text("{}\n")
    env = {"CODEAGENT_CONFIG": str(tmp_path / "config.yaml"), "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "traj"),
           "CODEAGENT_CACHE": str(tmp_path / "cache"), "PYTHONPATH": os.getcwd()}
    command = (" ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
               + f" {shlex.quote(sys.executable)} -m codeagent.cli solve {shlex.join(flags)}; echo EXIT=$?; sleep 120")
    new_session(name, "env " + command)
    return Pane(name)


def ctrl_c_twice(pane: Pane) -> str:
    pane.keys("C-c")
    time.sleep(0.2)
    pane.keys("C-c")
    return pane.wait_for("EXIT=", timeout=90)


def joined(text: str) -> str:
    """The pane's text with its wrapped lines joined (100 columns)."""
    return "".join(line.ljust(100)[:100] if len(line) >= 100 else line + "\n" for line in text.splitlines())


def test_ctrl_c_twice_while_the_sandbox_is_prepared_keeps_the_issue_and_exits_130(tmp_path, make_repo):
    # a repository of its own and a cache of its own: its sandbox's image is built now (seconds of start-up)
    repo = make_repo({"cart.py": "def total(lines):\n    return sum(lines[1:])\n"})
    server = FakeServer()
    server.replies += [FakeServer.HANG]
    name = f"codeagent-ctrlc-start-{os.getpid()}"
    pane = start(tmp_path, name, "--repo", str(repo), "--issue", ISSUE, "--model", "openai/test-model",
                 "--api-base", server.base)
    try:
        pane.wait_for(ISSUE[:30])
        text = joined(ctrl_c_twice(pane))
        assert "EXIT=130" in text, text
        assert "stopped before the agent's first step" in text, text
        kept = text.split("Issue kept in ")[1].split()[0]
        assert open(kept, encoding="utf-8").read() == ISSUE
        assert f"Start it again: codeagent solve --repo {repo} --issue-file {kept}" in text
    finally:
        close_terminal(name, str(tmp_path))
        server.close()


def test_ctrl_c_twice_after_the_run_began_prints_the_summary_and_exits_130(tmp_path):
    name = f"codeagent-ctrlc-run-{os.getpid()}"
    pane = start(tmp_path, name, "--example", "cart")  # no model: the example's recording, commands for real
    try:
        pane.wait_for("Run this command?", "repro.py")
        text = joined(ctrl_c_twice(pane))
        assert "EXIT=130" in text, text
        run_id = text.split("Resume it: codeagent solve --resume ")[1].split()[0]
        assert f"codeagent: session {run_id}" in text and "Patch: no changes" in text
    finally:
        close_terminal(name, str(tmp_path))


def test_the_end_of_run_notice_leaves_the_input_box_free(tmp_path):
    """The notice that a run ended shows at the top of the screen, not over the input box."""
    name = f"codeagent-notice-{os.getpid()}"
    pane = start(tmp_path, name, "--example", "cart", "--approval-mode", "full-auto")
    try:
        text = pane.wait_for("The run ended: submitted.", timeout=120)
        lines = text.rstrip("\n").splitlines()
        notice = next(index for index, line in enumerate(lines) if "The run ended" in line)
        prompt = next(index for index, line in enumerate(lines) if "Describe the issue to solve" in line)
        assert notice < len(lines) // 2 and "Describe the issue to solve · Enter sends · /help" in lines[prompt], text
        assert "The run ended" not in "".join(lines[prompt - 1:prompt + 2])
    finally:
        close_terminal(name, str(tmp_path))
