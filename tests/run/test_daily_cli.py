"""The daily loop through the real CLI (`python -m codeagent.cli solve --headless`) with a scripted
OpenAI-compatible server on 127.0.0.1: a session resumes with its model and server, a refused connection
fails at once naming host:port, Ctrl-C exits 130 at any moment and stops a command as a whole, and the
headless traps for CI (a plain answer, an empty submission, the issue on stdin).

Bounds on time are generous: they tell "within a few seconds" from the ~15-18 s of retries it took.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.support.fake_server import answer, completion, tool_call
from tests.support.processes import Output, free_port

pytestmark = pytest.mark.timeout(300)

ISSUE = "Greet the world instead of saying hello."


def codeagent(*args: str) -> list[str]:
    return [sys.executable, "-m", "codeagent.cli", "solve", "--headless", "--set", "agent.localize=false", *args]


def with_server(server, repo, *flags: str) -> list[str]:
    return codeagent("--repo", str(repo), "--model", "openai/test-model", "--api-base", server.base, *flags)


def run(command: list[str], env: dict, **options) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=240, **options)


def bash(command: str, call_id: str = "call_a") -> tuple[int, dict]:
    return 200, completion({"content": "", "tool_calls": [tool_call(json.dumps({"command": command}),
                                                                    call_id=call_id)]}, "tool_calls")


def submit(call_id: str = "call_s") -> tuple[int, dict]:
    return 200, completion({"content": "Done.", "tool_calls": [tool_call("{}", name="submit", call_id=call_id)]},
                           "tool_calls")


def chat_requests(server) -> list[dict]:
    return [request["body"] for request in server.requests if request["path"].endswith("/chat/completions")]


# -- 4. a session keeps its model and its server ------------------------------------------------------------

@pytest.mark.usefixtures("no_leaks")
def test_resume_goes_on_with_the_sessions_model_and_server(server, make_repo, env):
    repo = make_repo({"app.py": "print('hello')\n"})
    server.replies += [bash("sed -i 's/hello/hello world/' app.py"), submit()]
    first = run(with_server(server, repo, "--issue", ISSUE), env)
    assert first.returncode == 0, first.stderr
    session = first.stderr.split("trajectory: ")[1].split()[0]
    record = json.loads((env_path(env) / f"{session}.jsonl").read_text().splitlines()[0])["trajectory"]
    assert (record["model"], record["api_base"]) == ("openai/test-model", server.base)  # never a key

    # the command the TUI prints at the end ("Resume it: codeagent solve --resume ID"): no --model given
    server.replies += [answer("It prints hello world now.")]
    resumed = run(codeagent("--repo", str(repo), "--resume", session, "--issue", "What does it print now?"), env)
    assert resumed.returncode == 0, resumed.stderr
    assert "model openai/test-model" in resumed.stderr and "exit status: answered" in resumed.stderr
    last = chat_requests(server)[-1]
    assert last["messages"][-1] == {"role": "user", "content": "What does it print now?"}
    assert "hello world" in resumed.stdout  # the session's patch, carried on


def env_path(env: dict):
    from pathlib import Path

    return Path(env["CODEAGENT_TRAJECTORY_DIR"])


def test_the_flags_override_the_sessions_model_and_server():
    from codeagent.config import Config
    from codeagent.run.solve import continue_with_session_model
    from codeagent.trajectory.schema import Trajectory

    session = Trajectory(id="s", model="hosted_vllm/qwen", api_base="http://gpu:8000/v1")

    def continued(flags: dict, **configured) -> tuple:
        config = Config(model=configured)
        continue_with_session_model(config, session, flags)
        return config.model.name, config.model.api_base

    assert continued({}, name="gpt-4o") == ("hosted_vllm/qwen", "http://gpu:8000/v1")  # over the user's config
    assert continued({"model": {"name": "gpt-4o"}}, name="gpt-4o") == ("gpt-4o", None)
    assert continued({"model": {"api_base": "http://new:8000/v1"}}, api_base="http://new:8000/v1") == (
        "hosted_vllm/qwen", "http://new:8000/v1")
    old = Trajectory(id="o", model="openai/x", config={"model": {"api_base": "http://old/v1"}})  # before api_base
    config = Config()
    continue_with_session_model(config, old, {})
    assert (config.model.name, config.model.api_base) == ("openai/x", "http://old/v1")
    switched = Trajectory(id="w", model="gpt-4o", api_base="", config={"model": {"api_base": "http://old/v1"}})
    continue_with_session_model(config, switched, {})  # /model moved it to a provider: no server
    assert (config.model.name, config.model.api_base) == ("gpt-4o", None)


def test_the_tui_reopens_a_session_with_its_model(make_repo, tmp_path, monkeypatch):
    """`codeagent solve --resume ID` in a terminal (the TUI) gets the session's model, as headless does."""
    from codeagent.cli import solve_command
    from codeagent.run.solve_request import SolveRequest
    from codeagent.trajectory.store import TrajectoryStore

    monkeypatch.setenv("CODEAGENT_TRAJECTORY_DIR", str(tmp_path / "trajs"))
    monkeypatch.setenv("CODEAGENT_CONFIG", str(tmp_path / "none.yaml"))
    repo = make_repo({"app.py": "print('hello')\n"})
    with TrajectoryStore(tmp_path / "trajs").create(task={"repo": str(repo), "problem_statement": ISSUE},
                                                    model="hosted_vllm/qwen",
                                                    config={"model": {"api_base": "http://gpu:8000/v1"}}) as w:
        session = w.id  # a record of before `api_base` was kept at the top: its config says
    opened = {}
    monkeypatch.setattr("codeagent.tui.run_tui", lambda config, model, **options: opened.update(
        model=model, resume=options["resume"]) or 0)
    assert solve_command._solve_in_tui(SolveRequest(repo=str(repo), session=session[:12])) == 0
    assert (opened["model"].name, opened["model"].api_base, opened["resume"]) == (
        "hosted_vllm/qwen", "http://gpu:8000/v1", session)


# -- 5. a refused connection ---------------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["openai/gpt-4o", "hosted_vllm/served"])
def test_a_refused_connection_fails_at_once_naming_the_server(model, make_repo, env, tmp_path):
    repo = make_repo({"app.py": "print('hello')\n"})
    port = free_port()
    started = time.monotonic()
    proc = run(codeagent("--repo", str(repo), "--issue", ISSUE, "--model", model, "--api-base",
                         f"http://127.0.0.1:{port}/v1"), env)  # default retries
    took = time.monotonic() - started
    assert proc.returncode == 5, proc.stderr
    assert f"cannot connect to 127.0.0.1:{port}" in proc.stderr and "API key" not in proc.stderr
    assert "retry" not in proc.stderr and proc.stderr.count("cannot connect") == 1, proc.stderr  # one line
    assert not (tmp_path / "trajs").exists()  # told before the run: no sandbox, no trajectory
    assert took < 10, f"took {took:.1f}s"  # not the ~15-18 s of retries


@pytest.mark.usefixtures("no_leaks")
def test_a_retry_is_printed_once_and_a_plain_answer_is_answered(server, make_repo, env):
    """7: a reply without a tool call is the agent's answer headless too (as in the TUI): the run ends
    `answered` (exit 0), the agent does not go on editing. 5: a failed attempt is one line."""
    repo = make_repo({"app.py": "print('hello')\n"})
    server.replies += [(503, {"error": {"message": "overloaded"}}), answer("app.py prints hello; nothing to fix.")]
    proc = run(with_server(server, repo, "--issue", "What does app.py print?"), env)
    assert proc.returncode == 0, proc.stderr
    assert "exit status: answered" in proc.stderr and "app.py prints hello; nothing to fix." in proc.stderr
    assert len(chat_requests(server)) == 2  # the failed attempt and the answer: nothing after it
    assert proc.stderr.count("overloaded") == 1, proc.stderr  # the retry, printed once


# -- 6. Ctrl-C ------------------------------------------------------------------------------------------------

@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize("when", ["preparing", "1s"])
def test_ctrl_c_while_the_sandbox_is_prepared_exits_130(when, server, make_repo, env):
    repo = make_repo({"app.py": "print('hello')\n", f"{when}.txt": "a tree of its own: its image is built now\n"})
    proc = subprocess.Popen(with_server(server, repo, "--issue", ISSUE), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    try:
        stderr = Output(proc.stderr)
        if when == "preparing":
            stderr.wait_for("preparing the docker sandbox")
        else:
            time.sleep(1)
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr.text
    stderr.wait_for("interrupted", timeout=10)
    assert "Aborted!" not in stderr.text and "Traceback" not in stderr.text


@pytest.mark.parametrize("where, patch", [
    ("the model check", "import codeagent.run.model_check as m\nm.preflight = lambda model, paid=False: {raise_}\n"),
    ("a run", "import codeagent.agent.model_call as m\nm.ModelCall._ask = lambda self, complete: {raise_}\n"),
])
def test_ctrl_c_inside_an_exec_still_exits_130(where, patch, tmp_path, env):
    """A Ctrl-C that lands in code run by exec() (dataclasses does that while litellm is imported) left
    CPython's 'unhandled' mark set: after the interrupt was handled (by the CLI, or by the run, which
    ends `interrupted`) the process killed itself with SIGINT (-2). Made deterministic here: a
    KeyboardInterrupt raised from an exec(), in a command run as `python -m` (the way that mark is read
    at exit)."""
    (tmp_path / "interrupt_in_exec.py").write_text(
        "import sys\n" + patch.format(raise_="exec('raise KeyboardInterrupt')")
        + "sys.argv = ['codeagent', 'solve', '--headless', '--example', 'cart']\n"
        "from codeagent.cli import main\n"
        "main()\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = run([sys.executable, "-m", "interrupt_in_exec"], {**env, "PYTHONPATH": root}, cwd=tmp_path)
    assert proc.returncode == 130, (where, proc.stderr)
    assert "interrupted" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.usefixtures("no_leaks")
def test_ctrl_c_stops_the_whole_command_line(server, make_repo, env):
    """Ctrl-C during `sleep 40; echo woke > woke.txt`: the command stops as a whole, `echo` never runs."""
    repo = make_repo({"app.py": "print('hello')\n"})
    server.replies += [bash("sleep 40; echo woke > woke.txt")]
    proc = subprocess.Popen(with_server(server, repo, "--issue", ISSUE), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    try:
        stderr = Output(proc.stderr)
        stderr.wait_for("$ sleep 40")
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)  # not communicate(): it would read stderr too, racing the reader above
        stdout = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr.text
    stderr.wait_for("trajectory: ", timeout=10)  # the reader has all of it
    assert "exit status: interrupted" in stderr.text, stderr.text
    assert b"woke" not in stdout and "no patch: the run changed no file" in stderr.text, stdout
    assert re.search(r"interrupted · (\d+\.\d+)s", stderr.text) and \
        float(re.search(r"interrupted · (\d+\.\d+)s", stderr.text)[1]) >= 1.0, stderr.text  # not 0.00 s
    path = stderr.text.split("trajectory: ")[1].split("(")[1].split(")")[0]
    (stopped,) = [json.loads(line) for line in open(path)][1]["step"]["tool_calls"]
    assert stopped["seconds"] >= 1.0  # the trajectory too


# -- 7. headless traps for CI ----------------------------------------------------------------------------------

@pytest.mark.usefixtures("no_leaks")
def test_an_empty_submission_has_its_own_exit_code_and_the_issue_comes_on_stdin(server, make_repo, env):
    repo = make_repo({"app.py": "print('hello')\n"})
    server.replies += [(200, completion({"content": "", "tool_calls": [tool_call("{not json", call_id="c0")]},
                                        "tool_calls")),
                       bash("cat app.py"), submit()]
    proc = run(with_server(server, repo, "--issue-file", "-"), env, input="The greeting is wrong (from stdin).")
    assert proc.returncode == 6, proc.stderr
    assert "exit status: empty_submission" in proc.stderr and "unusable reply" in proc.stderr  # the format error
    assert "The greeting is wrong (from stdin)." in chat_requests(server)[0]["messages"][1]["content"]

    server.replies += [submit()]
    proc = run(with_server(server, repo, "--issue-file", "-", "--json"), env, input=ISSUE)
    assert proc.returncode == 6, proc.stderr
    finished = json.loads(proc.stdout.splitlines()[-1])
    assert (finished["kind"], finished["exit_status"], finished["patch"]) == ("finished", "empty_submission", "")


@pytest.mark.usefixtures("no_leaks")
def test_an_interrupt_in_the_tui_stops_the_whole_command_line(make_repo, tmp_path):
    """The TUI's Ctrl-C (Agent.interrupt from the screen's thread) stops `sleep 40; echo woke` as a whole;
    the next command gets a new shell in the last working directory, with the exported variables."""
    from tests.support.scripted import call
    from tests.support.session import Recorder, make_session

    recorder = Recorder()
    turns = [call("bash", command="mkdir sub && cd sub && export KEEP=kept"),
             call("bash", command="sleep 40; echo woke > woke.txt")]
    session, _ = make_session(make_repo({"app.py": "print('hello')\n"}), turns, tmp_path, recorder, mode="full-auto")
    try:
        session.submit(ISSUE)
        deadline = time.monotonic() + 120
        while recorder.kinds().count("tool_called") < 2:
            assert time.monotonic() < deadline, recorder.kinds()
            time.sleep(0.05)
        time.sleep(1.5)
        session.interrupt()
        assert session.wait_idle(60) and session.last_status == "interrupted"
        time.sleep(1)  # what a shell left running would do next, it has done by now
        after = session.sandbox.run("echo $KEEP; pwd; ls", timeout=30).output.split()
    finally:
        session.close()
    assert after == ["kept", "/testbed/sub"], after  # no woke.txt
    [observation] = [event for event in recorder.events if event.kind == "observation"][1:]
    assert observation.interrupted and "woke" not in observation.output
