"""A skill's files in the sandbox (issue 38, item 5): a SKILL.md that says "run scripts/check.sh" can be
followed. The folder is mounted read-only in the Docker sandbox (at /opt/codeagent/skills/NAME), the `skill`
tool says where, its script runs there through the usual bash tool, and nothing can be written into it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.usefixtures("no_leaks")

SKILL = """---
name: check
description: Checks the project's style. Use it before you submit.
---
Run `bash scripts/check.sh` from this skill's folder; it prints what to fix.
"""


def call(number: int, tool: str, **arguments) -> dict:
    return {"id": f"c{number}", "type": "function", "function": {"name": tool, "arguments": json.dumps(arguments)}}


def test_a_skills_script_runs_in_the_sandbox_from_its_read_only_folder(repo, env, tmp_path):
    skill = tmp_path / "skills" / "check"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL)
    (skill / "scripts" / "check.sh").write_text("echo \"style check ran in $(pwd) on $(ls main.py)\"\n")
    (tmp_path / "no-user-config.yaml").write_text("{}\n")  # CODEAGENT_CONFIG's folder holds the user's skills/
    where = "/opt/codeagent/skills/check"
    script = {"id": "s", "model": "scripted", "messages": [
        {"role": "assistant", "content": "", "tool_calls": [call(1, "skill", name="check")]},
        {"role": "assistant", "content": "", "tool_calls": [call(2, "bash", command=f"bash {where}/scripts/check.sh"),
                                                            call(3, "bash", command=f"touch {where}/x; echo > {where}/SKILL.md")]},
        {"role": "assistant", "content": "Style checked."}]}
    (tmp_path / "script.json").write_text(json.dumps(script))
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "solve", "--headless", "--repo", str(repo), "--json",
                           "--issue", "Check the style.", "--model", f"replay:{tmp_path / 'script.json'}",
                           "--set", "agent.localize=false"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    observed = {event["call_id"]: event for event in map(json.loads, proc.stdout.splitlines())
                if event["kind"] == "observation"}
    assert f"in the sandbox, read-only, at {where}" in observed["c1"]["output"], observed["c1"]["output"]
    assert observed["c2"]["exit_code"] == 0 and "style check ran in /testbed on main.py" in observed["c2"]["output"]
    assert observed["c3"]["exit_code"] != 0 and "Read-only file system" in observed["c3"]["output"]
    assert (skill / "SKILL.md").read_text() == SKILL and not (skill / "x").exists()
