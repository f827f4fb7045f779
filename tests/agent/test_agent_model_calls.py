"""A model server that accepts a request and never answers: the run still ends on its time limit, on an
interrupt from another thread (the TUI's Ctrl-C) and on Ctrl-C in the main thread, with the patch kept.

The server is the real HTTP server of the litellm tests on 127.0.0.1; the sandbox is the real Docker one.
The bounds on time are generous: they tell "ended soon after" from "waited on the request's timeout".
"""

from __future__ import annotations

import json
import signal
import threading
import time

import pytest

from codeagent.agent.loop import Agent
from codeagent.config import Config
from codeagent.models import Sampling, make_model, model_options
from codeagent.sandbox import open_sandbox
from codeagent.task import Task
from codeagent.trajectory.store import TrajectoryStore
from tests.support.fake_server import FakeServer, completion, tool_call

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(180)]


def setup(server, tmp_path, make_repo, **limits):
    repo = make_repo({"app.py": "print('hello')\n"})
    config = Config(agent={"localize": False}, limits=limits,
                    model={"name": "openai/test-model", "api_base": server.base, "timeout": 120})
    model = make_model(config.model.name, **model_options(config.model))
    server.replies.append((200, completion({"content": "warm"})))  # litellm's import and first-call setup,
    model.complete([{"role": "user", "content": "hi"}], [], Sampling())  # outside the timed run
    agent = Agent(model, config, store=TrajectoryStore(tmp_path / "trajectories"))
    task = Task(repo=str(repo), problem_statement="Say hello politely.")
    return agent, task


def edit_then_hang(server):
    arguments = json.dumps({"command": "sed -i 's/hello/hello, world/' app.py"})
    server.replies += [(200, completion({"content": "", "tool_calls": [tool_call(arguments)]},
                                        finish_reason="tool_calls")), FakeServer.HANG]


def test_max_seconds_ends_a_run_whose_model_call_hangs(server, tmp_path, make_repo):
    agent, task = setup(server, tmp_path, make_repo, max_seconds=3)
    server.replies.append(FakeServer.HANG)
    with open_sandbox(task.repo) as sandbox:
        result = agent.run(task, sandbox)
    assert result.exit_status == "max_time" and "abandoned" in result.message  # ended during the call
    assert result.seconds < 30  # not the request's 120 s timeout


def test_an_interrupt_from_another_thread_ends_a_hanging_call_and_keeps_the_patch(server, tmp_path, make_repo):
    agent, task = setup(server, tmp_path, make_repo)
    edit_then_hang(server)
    interrupted_at: list[float] = []

    def interrupt_when_hanging():
        if server.hanging.wait(120):
            interrupted_at.append(time.monotonic())
            agent.interrupt()

    helper = threading.Thread(target=interrupt_when_hanging, daemon=True)
    helper.start()
    with open_sandbox(task.repo) as sandbox:
        result = agent.run(task, sandbox)
        finished_at = time.monotonic()
    helper.join(5)
    assert interrupted_at and finished_at - interrupted_at[0] < 20
    assert result.exit_status == "interrupted"
    assert "+print('hello, world')" in result.patch
    saved = agent.store.load(result.trajectory_id)
    assert saved.exit_status == "interrupted" and saved.patch == result.patch


def test_ctrl_c_in_the_main_thread_ends_a_hanging_call(server, tmp_path, make_repo):
    agent, task = setup(server, tmp_path, make_repo)
    edit_then_hang(server)
    main = threading.main_thread().ident

    def ctrl_c_when_hanging():
        if server.hanging.wait(120):
            signal.pthread_kill(main, signal.SIGINT)

    helper = threading.Thread(target=ctrl_c_when_hanging, daemon=True)
    helper.start()
    with open_sandbox(task.repo) as sandbox:
        result = agent.run(task, sandbox)
    helper.join(5)
    assert result.exit_status == "interrupted" and "+print('hello, world')" in result.patch
