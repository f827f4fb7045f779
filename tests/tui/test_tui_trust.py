"""The TUI asks once whether to trust a repository whose .codeagent.yaml sets what needs trust."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

from codeagent.run.examples import example_repo
from codeagent.tui.trust_screen import TrustApp
from tests.support.fake_server import FakeServer, completion, tool_call
from tests.support.terminal import Pane, new_session


@pytest.mark.parametrize(("key", "answer"), [("t", True), ("n", False), ("escape", False), ("ctrl+c", None)])
def test_the_trust_question_answers(key, answer):
    async def run():
        app = TrustApp("/src/theirs", ["model.api_base", "sandbox.kind"])
        async with app.run_test() as pilot:
            await pilot.press(key)
            await pilot.pause()
        return app.return_value

    assert asyncio.run(run()) is answer


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install -y tmux)")
def test_asked_once_in_a_real_terminal_and_remembered(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(example_repo("cart")), str(clone)], check=True)
    (clone / ".codeagent.yaml").write_text("model: {name: hosted_vllm/their-model, api_base: 'http://127.0.0.1:9'}\n")
    user = tmp_path / "config.yaml"
    user.write_text("# mine\nlimits: {max_steps: 20}\n")
    env = {"CODEAGENT_CONFIG": str(user), "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "traj"), "PYTHONPATH": os.getcwd()}
    command = (" ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
               + f" {shlex.quote(sys.executable)} -m codeagent.cli solve --repo {shlex.quote(str(clone))};"
               + " echo EXIT=$?; sleep 120")

    def session(answer: str | None, expect: str) -> str:
        name = f"codeagent-trust-{os.getpid()}"
        new_session(name, "env " + command)
        pane = Pane(name)
        try:
            if answer:
                pane.wait_for("Do you trust this repository?", "model.name, model.api_base")
                pane.keys(answer)
            shown = pane.wait_for(expect, "/help")
            pane.keys("/quit", "Enter")
            assert "EXIT=0" in pane.wait_for("EXIT=")
            return shown
        finally:
            subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True, check=False)

    assert "their-model" not in session("n", expect="No model is configured")
    assert "trusted_projects" not in user.read_text()
    session("t", expect="their-model")
    assert user.read_text().startswith("# mine\n")
    assert yaml.safe_load(user.read_text())["trusted_projects"] == [str(clone.resolve())]
    session(None, expect="their-model")  # remembered: not asked again


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install -y tmux)")
def test_command_output_cannot_retitle_the_terminal(tmp_path):
    """A command that prints OSC 0 (set the window title) in the TUI: the terminal's title stays."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(example_repo("cart")), str(clone)], check=True)
    server = FakeServer()
    attack = r"printf '\033]0;pwned\007\033]2;pwned\007'; echo done-printing"
    for arguments, name in ((json.dumps({"command": attack}), "bash"), ("{}", "submit")):
        server.replies.append((200, completion({"content": "\x1b]0;pwned-by-the-reply\x07",
                                                "tool_calls": [tool_call(arguments, name=name)]},
                                               finish_reason="tool_calls")))
    env = {"CODEAGENT_CONFIG": str(tmp_path / "none.yaml"), "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "traj"),
           "PYTHONPATH": os.getcwd(), "OPENAI_API_KEY": "sk-test"}
    command = (" ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
               + f" {shlex.quote(sys.executable)} -m codeagent.cli solve --repo {shlex.quote(str(clone))}"
               + f" --issue fix --model openai/test --api-base {server.base} --approval-mode full-auto;"
               + " echo EXIT=$?; sleep 120")
    name = f"codeagent-title-{os.getpid()}"
    new_session(name, "env " + command)
    pane = Pane(name)
    try:
        pane.wait_for("submitted", "/help")
        title = subprocess.run(["tmux", "display-message", "-p", "-t", name, "#{pane_title}"], capture_output=True,
                               text=True, check=True).stdout
        pane.keys("/quit", "Enter")
        pane.wait_for("EXIT=")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True, check=False)
        server.close()
    assert len(server.requests) == 2 and "pwned" not in title
