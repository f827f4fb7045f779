"""What headless `codeagent solve` prints on stdout (docs/solve.md's table): the answer of a run that ended
`answered` (a question, plan mode, the issue on standard input), the patch of any other; with --json the
`finished` event carries the answer. A real CLI in a local sandbox, with a scripted model."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

ANSWER = "The loop starts at 1, so the first item is skipped.\nStart it at 0."


def script(tmp_path, *messages) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"id": "s", "model": "scripted", "messages": list(messages)}))
    return f"replay:{path}"


def solve(repo, env, model, *flags, stdin=None):
    return subprocess.run([sys.executable, "-m", "codeagent.cli", "solve", "--headless", "--repo", str(repo),
                           "--sandbox", "local", "--model", model, "--set", "agent.localize=false", *flags],
                          input=stdin, capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("flags", [["--issue", "why is the first item skipped?"],
                                   ["--issue", "how would you fix it?", "--mode", "plan"],
                                   ["--issue-file", "-"]])
def test_an_answer_goes_to_stdout_and_progress_to_stderr(repo, env, tmp_path, flags):
    model = script(tmp_path, {"role": "assistant", "content": ANSWER})
    proc = solve(repo, env, model, *flags, stdin="why is the first item skipped?")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ANSWER + "\n"
    assert "exit status: answered" in proc.stderr


def test_json_finished_carries_the_answer(repo, env, tmp_path):
    model = script(tmp_path, {"role": "assistant", "content": ANSWER})
    proc = solve(repo, env, model, "--issue", "why?", "--json")
    finished = [json.loads(line) for line in proc.stdout.splitlines()][-1]
    assert proc.returncode == 0 and finished["kind"] == "finished", proc.stderr
    assert finished["exit_status"] == "answered" and finished["answer"] == ANSWER


def test_a_submitted_patch_goes_to_stdout_and_an_answer_with_edits_keeps_its_patch_in_the_file(repo, env, tmp_path):
    edit = {"id": "c1", "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": "echo x >> main.py"})}}
    submit = {"id": "c2", "type": "function", "function": {"name": "submit", "arguments": "{}"}}
    submitted = solve(repo, env, script(tmp_path, {"role": "assistant", "content": "", "tool_calls": [edit]},
                                        {"role": "assistant", "content": "Done.", "tool_calls": [submit]}),
                      "--issue", "add x")
    assert submitted.returncode == 0, submitted.stderr
    assert submitted.stdout.startswith("diff --git a/main.py b/main.py") and "+x" in submitted.stdout

    answered = solve(repo, env, script(tmp_path, {"role": "assistant", "content": "", "tool_calls": [edit]},
                                       {"role": "assistant", "content": "I added x; review it."}),
                     "--issue", "add x")
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout == "I added x; review it.\n"
    written = [line for line in answered.stderr.splitlines() if line.startswith("patch written to ")]
    assert written and "+x" in open(written[0].removeprefix("patch written to ").strip()).read()
