"""The TUI (Textual's pilot) against a streaming scripted server on 127.0.0.1, in a real Docker sandbox: the
reply shows as it forms, the wait for a first token is shown, Ctrl-C ends a held request; an interrupted
command says so instead of an exit code.

Bounds on time are generous: they tell "ended soon after" from "waited out the server's 60 s hold".
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from codeagent.config import Config
from codeagent.models import LiteLLMModel
from codeagent.run.session import Session
from codeagent.trajectory.store import TrajectoryStore
from codeagent.tui.app import CodeagentApp
from tests.support.fake_server import Streamed, chunks, pieces
from tests.support.scripted import FILES, call
from tests.support.terminal import Pane, new_session
from tests.support.tui import make_app, quit_app, screen_text, sync, type_line, until

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(240)]


@sync
async def test_the_reply_shows_as_it_forms_and_ctrl_c_ends_a_held_request(server, make_repo, tmp_path):
    repo = make_repo(FILES)
    command = json.dumps({"command": "echo streamed-$((40 + 2))"})
    first = Streamed(chunks(["Looking at ", "calc.py now."], [("bash", pieces(command, 5))], "tool_calls"),
                     hold_at=2)  # the role chunk and "Looking at ", then held
    second = Streamed(chunks(["never sent"]), hold_at=0, hold_seconds=60)  # held before any token
    server.replies += [(503, {"error": {"message": "overloaded"}}), first, second]
    model = LiteLLMModel("openai/test-model", api_base=server.base, retries=1, backoff_base=0.1)
    session = Session(Config(agent={"localize": False}), model, repo=str(repo), mode="full-auto",
                      store=TrajectoryStore(tmp_path / "trajectories"))
    app = CodeagentApp(session)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_line(pilot, "add() subtracts")
        await until(pilot, lambda: first.held.is_set() and "Looking at" in screen_text(app), timeout=120,
                    what="the text before the reply ends")
        shown = screen_text(app)
        assert "calc.py now" not in shown and not first.release.is_set()
        assert "overloaded" in shown and "retry 1/1" in shown  # the failed attempt was told, with its reason
        first.release.set()
        await until(pilot, lambda: "Looking at calc.py now." in screen_text(app), what="the whole reply")
        # its arguments, streamed in pieces, arrived whole
        await until(pilot, lambda: "$ echo streamed-$((40 + 2)) · exit 0" in screen_text(app), what="the command")
        await until(pilot, lambda: second.held.is_set() and "waiting for the model (2s)" in screen_text(app),
                    what="the wait for the next reply")
        begun = time.monotonic()
        await pilot.press("ctrl+c")
        await until(pilot, lambda: session.last_status == "interrupted" and not session.busy, what="the interrupt")
        assert time.monotonic() - begun < 15 and not second.release.is_set()  # not the server's 60 s hold
        assert second.hung_up.wait(10)  # the held request's connection was closed
        await pilot.pause(0.1)
        assert "waiting for the model" not in screen_text(app)
        await quit_app(pilot, session)


@sync
async def test_an_interrupted_command_does_not_show_exit_0(make_repo, tmp_path):
    repo = make_repo(FILES)
    app, session, _ = make_app(repo, tmp_path, [call("bash", command="sleep 60; true")], mode="full-auto")
    async with app.run_test(size=(100, 30)) as pilot:
        await type_line(pilot, "wait a while")
        await until(pilot, lambda: "$ sleep 60; true · running…" in screen_text(app), what="the long command")
        await pilot.press("ctrl+c")
        await until(pilot, lambda: session.last_status == "interrupted" and not session.busy, what="the interrupt")
        await pilot.pause(0.1)
        shown = screen_text(app)
        assert "$ sleep 60; true · interrupted" in shown and "exit 0" not in shown, shown
        await quit_app(pilot, session)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install -y tmux)")
def test_streaming_and_ctrl_c_in_a_real_terminal(server, make_repo, tmp_path):
    repo = make_repo(FILES)
    first = Streamed(chunks(["Looking at ", "calc.py now."], [("bash", pieces('{"command": "echo hi"}', 4))],
                            "tool_calls"), hold_at=2)
    second = Streamed(chunks(["never sent"]), hold_at=0, hold_seconds=60)
    server.replies += [first, second]
    name = f"codeagent-stream-{os.getpid()}"
    env = {"CODEAGENT_CONFIG": str(tmp_path / "no-config.yaml"), "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "traj"),
           "PYTHONPATH": os.getcwd()}
    command = (" ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
               + f" {shlex.quote(sys.executable)} -m codeagent.cli solve --repo {shlex.quote(str(repo))} --issue "
               f"'add() subtracts' --model openai/test-model --api-base {server.base} --approval-mode full-auto "
               "--set agent.localize=false; echo EXIT=$?; sleep 120")
    new_session(name, "env -u OPENAI_API_KEY " + command)
    pane = Pane(name)
    try:
        assert first.held.wait(120), pane.text()
        text = pane.wait_for("Looking at")
        assert "calc.py now" not in text and not first.release.is_set()  # shown before the reply ended
        first.release.set()
        pane.wait_for("Looking at calc.py now.", "$ echo hi · exit 0")
        assert second.held.wait(60), pane.text()
        pane.wait_for("waiting for the model (2s)")
        pane.keys("C-c")
        begun = time.monotonic()
        pane.wait_for("■ interrupted", timeout=30)
        assert time.monotonic() - begun < 15 and not second.release.is_set()
        pane.keys("/quit", "Enter")
        assert "EXIT=0" in pane.wait_for("EXIT=")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True, check=False)
