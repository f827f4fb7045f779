"""`codeagent solve --headless` against a streaming scripted server on 127.0.0.1, in a real Docker sandbox:
the reply's text is printed as it forms, the wait for a first token is shown, Ctrl-C ends a held request
at once (exit 130), and `--json` prints whole events only unless deltas are asked for.

Bounds on time are generous: they tell "ended soon after" from "waited out the server's 60 s hold".
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.support.fake_server import Streamed, chunks, pieces
from tests.support.processes import Output

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(240)]

EDIT = json.dumps({"command": "sed -i 's/hello/hello, \"world\"/' app.py && cat app.py"})


def solve_command(server, repo, *flags: str) -> list[str]:
    return [sys.executable, "-m", "codeagent.cli", "solve", "--repo", str(repo), "--issue", "Greet the world.",
            "--model", "openai/test-model", "--api-base", server.base, "--set", "agent.localize=false", *flags]


def test_headless_prints_the_text_as_it_forms_and_ctrl_c_ends_a_held_request(server, make_repo, env):
    repo = make_repo({"app.py": "print('hello')\n"})
    first = Streamed(chunks(["Looking at ", "the greeting now."], [("bash", pieces(EDIT))], "tool_calls"),
                     hold_at=2)  # the role chunk and "Looking at ", then held
    second = Streamed(chunks(["never sent"]), hold_at=0, hold_seconds=60)  # held before any token
    server.replies += [(503, {"error": {"message": "overloaded"}}), first, second]
    proc = subprocess.Popen(solve_command(server, repo, "--headless"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    try:
        stderr = Output(proc.stderr)
        assert first.held.wait(120), stderr.text
        stderr.wait_for("Looking at")
        assert "overloaded; retry 1/" in stderr.text  # the failed attempt was told, with its reason
        assert "the greeting now" not in stderr.text and not first.release.is_set()  # shown before the reply ended
        first.release.set()
        stderr.wait_for("Looking at the greeting now.")
        stderr.wait_for("hello, \"world\"")  # the tool call's arguments, streamed in pieces, ran whole
        assert second.held.wait(60), stderr.text
        stderr.wait_for("waiting for the model (2s)")  # not silent while no token comes
        proc.send_signal(signal.SIGINT)
        interrupted_at = time.monotonic()
        proc.wait(60)
        ended_in = time.monotonic() - interrupted_at
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr.text
    assert ended_in < 15 and not second.release.is_set()  # not the server's 60 s hold
    assert second.hung_up.wait(10)  # the held request's connection was closed
    time.sleep(0.2)
    assert "exit status: interrupted" in stderr.text


def run_json(server, repo, env, *flags: str) -> list[dict]:
    server.replies += [
        Streamed(chunks(["Editing ", "the greeting."], [("bash", pieces(EDIT))], "tool_calls")),
        Streamed(chunks(["Done."], [("submit", ["{", "}"])], "tool_calls")),
    ]
    proc = subprocess.run(solve_command(server, repo, *flags), capture_output=True, text=True, env=env, timeout=200)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]  # one whole JSON object per line


def test_json_has_whole_events_only_and_deltas_when_asked(server, make_repo, env):
    events = run_json(server, make_repo({"app.py": "print('hello')\n"}), env, "--json")
    kinds = [event["kind"] for event in events]
    assert "model_delta" not in kinds and "model_waiting" not in kinds
    assert kinds[0] == "run_started" and kinds[-1] == "finished" and events[-1]["exit_status"] == "submitted"
    [called, _] = [event for event in events if event["kind"] == "tool_called"]
    assert called["arguments"] == json.loads(EDIT)

    events = run_json(server, make_repo({"app.py": "print('hello')\n"}), env, "--json-deltas")
    first_step = [event for event in events if event.get("step") == 0]
    deltas = [event for event in first_step if event["kind"] == "model_delta"]
    output = next(event for event in first_step if event["kind"] == "model_output")
    assert first_step.index(output) > first_step.index(deltas[-1])  # the pieces come before the whole reply
    assert "".join(delta["text"] for delta in deltas) == output["text"] == "Editing the greeting."
    arguments = [delta for delta in deltas if delta["tool_index"] == 0]
    assert arguments[0]["tool"] == "bash" and arguments[0]["call_id"] == output["tool_calls"][0]["id"]
    assert "".join(delta["arguments"] for delta in arguments) == EDIT
    assert events[-1]["exit_status"] == "submitted"
