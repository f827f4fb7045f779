"""Plan mode through the real CLI (`solve --mode plan`), with a scripted model: it reads files and runs
read-only commands; every write, and `submit`, is refused with a reason the model can act on."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from codeagent.run.examples import example_repo

pytestmark = pytest.mark.usefixtures("no_leaks")

WRITES = ["rm shop/cart.py", "cat shop/cart.py > copy.py", "sed -i s/self/me/ shop/cart.py",
          "find . -name '*.py' -delete", "ls a#; rm shop/cart.py"]


def tool_call(number: int, name: str, **arguments) -> dict:
    return {"id": f"c{number}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def test_plan_mode_reads_files_and_runs_read_only_commands_and_refuses_writes(tmp_path):
    clone = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(example_repo("cart")), str(clone)], check=True)
    calls = [tool_call(1, "editor", command="view", path="shop/cart.py"),
             tool_call(2, "bash", command="git log --oneline -3 && git status --short"),
             *[tool_call(3 + index, "bash", command=command) for index, command in enumerate(WRITES)],
             tool_call(8, "editor", command="create", path="new.py", file_text="x = 1\n"),
             tool_call(9, "submit")]
    script = {"id": "plan-script", "model": "scripted",
              "messages": [{"role": "assistant", "content": "", "tool_calls": calls},
                           {"role": "assistant", "content": "Plan: make remove() delete the line."}]}
    (tmp_path / "script.json").write_text(json.dumps(script))
    env = {**os.environ, "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "trajs"),
           "CODEAGENT_CONFIG": str(tmp_path / "no-user-config.yaml")}
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "solve", "--repo", str(clone), "--issue",
                           "How would you fix remove()?", "--mode", "plan", "--json",
                           "--model", f"replay:{tmp_path / 'script.json'}"],
                          capture_output=True, text=True, env=env, timeout=300)
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    observed = {event["call_id"]: event for event in events if event["kind"] == "observation"}
    assert proc.returncode == 0 and events[-1]["exit_status"] == "answered", proc.stderr

    assert not observed["c1"]["error"] and "class Cart" in observed["c1"]["output"]
    assert observed["c2"]["exit_code"] == 0 and re.match(r"[0-9a-f]{7,} \S", observed["c2"]["output"])
    for number in range(3, 10):
        assert observed[f"c{number}"]["error"], observed[f"c{number}"]
        assert observed[f"c{number}"]["output"].startswith("Not run: plan mode is on"), observed[f"c{number}"]
    assert "`rm` is not a read-only command" in observed["c3"]["output"]
    assert "redirection to a file" in observed["c4"]["output"]
    assert "`sed -i` edits files" in observed["c5"]["output"]
    assert "`find -delete`" in observed["c6"]["output"] and "`rm` is not" in observed["c7"]["output"]
    assert "only views files" in observed["c8"]["output"] and "`submit` is not offered" in observed["c9"]["output"]
    assert events[-1]["patch"] == ""  # nothing changed in the sandbox



@pytest.mark.parametrize("command", [
    "find . $'-delete'", 'find . $"-delete"', "find . $OPTS", "find . \\-delete", "git -c core.pager=sh log",
    "git log --output=x", "git grep -Ovim x", "sort -ro out in", "sed -ni 1p f", "sed -n 1p --in-place f",
    "sed -n 's/a/b/w out' f", "rg --pre=sh x", "uniq in out", "X=1 ls", "ls & rm x", "(ls)", "cat < a",
    "ls `rm x`", "file -C -m x", "ls # ; rm x", "python -c 'open(1)'", "git push", "tee x"])
def test_read_only_commands_refuse_what_writes_or_hides(command):
    from codeagent.tools.read_only_commands import refusal

    assert refusal(command), command


@pytest.mark.parametrize("command", [
    "ls -la src", "cat a.py | head -n 20", "grep -rn 'def x$' src", "rg -n foo --glob '*.py'", "git log -p -3 -- a.py",
    "git diff HEAD~1 --stat && git status", "find . -name '*.py' -newer setup.py", "sed -n '10,20p' a.py",
    "wc -l a.py b.py; du -sh .", "sort a | uniq -c | sort -rn | head", "ls 2>/dev/null || echo none"])
def test_read_only_commands_let_reading_through(command):
    from codeagent.tools.read_only_commands import refusal

    assert refusal(command) is None, refusal(command)
