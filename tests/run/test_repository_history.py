"""The repository's history in `solve`'s sandbox (issue 38, item 3): the user's branches, tags and commits
(`git log`, `git blame`, `git show` work), nothing of their git config, stash or hooks, their repository not
written; the choice recorded in the trajectory; `agent.repository_history: false` seals it; the path eval and
training take stays sealed (one commit)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.support.git import git

pytestmark = pytest.mark.usefixtures("no_leaks")

LOOK = ("git log --format='%an|%s' | cat; echo ==; git blame -s a.py | cat; echo ==; git show v1:a.py; echo ==; "
        "git branch --format='%(refname:short)' | cat; echo ==; git config --list | cat; echo ==; "
        "git stash list | cat; ls .git/hooks | grep -v sample | cat; echo ==; git diff codeagent-base --stat | cat")


@pytest.fixture
def history_repo(make_repo):
    repo = make_repo({"a.py": "line 1\n"})
    for number in (2, 3):
        with open(repo / "a.py", "a") as file:
            file.write(f"line {number}\n")
        git(repo, "commit", "-qam", f"add line {number}")
    git(repo, "tag", "v1", "HEAD~1")
    git(repo, "branch", "feature", "HEAD~2")
    git(repo, "config", "secret.token", "hunter2-config")  # never reaches the sandbox
    (repo / "a.py").write_text("line 1\nline 2\nline 3\nstashed hunter2-stash\n")
    git(repo, "stash", "-q")
    (repo / ".git" / "hooks" / "post-checkout").write_text("#!/bin/sh\necho hook ran\n")
    (repo / "a.py").write_text("line 1\nline 2\nline 3\nuncommitted\n")  # the run starts from the working tree
    return repo


def run(repo, env, tmp_path, *flags):
    calls = [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": LOOK})}}]
    script = {"id": "s", "model": "scripted", "messages": [{"role": "assistant", "content": "", "tool_calls": calls},
                                                           {"role": "assistant", "content": "Looked."}]}
    (tmp_path / "script.json").write_text(json.dumps(script))
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "solve", "--headless", "--repo", str(repo),
                           "--issue", "Who wrote line 2?", "--model", f"replay:{tmp_path / 'script.json'}", "--json",
                           "--set", "agent.localize=false", *flags], capture_output=True, text=True, env=env, timeout=300)
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0, proc.stderr
    output = next(event["output"] for event in events if event["kind"] == "observation")
    trajectory = [json.loads(line) for line in open(events[-1]["trajectory_path"])][0]["trajectory"]
    parts = [part.strip("\n") for part in re.split(r"^==$", output, flags=re.MULTILINE)]
    return parts, trajectory["task"].get("extra", {}).get("repository_history"), proc.stderr


def test_solve_gets_the_history_and_nothing_else_of_the_repository(history_repo, env, tmp_path):
    refs_before = git(history_repo, "for-each-ref")
    (log, blame, shown, branches, config, stash_hooks, diff), given, stderr = run(history_repo, env, tmp_path)
    assert "history: 3 refs of your repository" in stderr
    subjects = [line.split("|", 1)[1] for line in log.splitlines()]
    assert subjects[1:] == ["add line 3", "add line 2", "initial"] and subjects[0].startswith("codeagent base")
    head = git(history_repo, "rev-parse", "HEAD").strip()
    assert blame.splitlines()[1].startswith(git(history_repo, "rev-parse", "--short=8", "HEAD~1").strip())
    assert shown == "line 1\nline 2"  # v1
    assert {"feature", "master", "codeagent-task"} <= set(branches.split()) or \
        {"feature", "main", "codeagent-task"} <= set(branches.split())
    assert "hunter2" not in config and "secret.token" not in config
    assert "hunter2" not in stash_hooks and "post-checkout" not in stash_hooks
    assert diff == ""  # the base is still the working tree: the user's uncommitted edit is not the agent's
    assert given["given"] is True and given["head"] == head and given["refs"] == 3
    assert git(history_repo, "for-each-ref") == refs_before and git(history_repo, "status", "--porcelain") == " M a.py\n"


def test_the_setting_seals_solve_as_eval_is(history_repo, env, tmp_path):
    (log, *_), given, _ = run(history_repo, env, tmp_path, "--set", "agent.repository_history=false")
    assert len(log.splitlines()) == 1 and given == {"given": False, "note": given["note"]}
    assert "sealed" in given["note"]


def test_the_eval_path_stays_sealed(history_repo, tmp_path, monkeypatch):
    """`solve()` as eval and training call it (no `history`): one commit in the sandbox, nothing recorded."""
    from codeagent.config import Config
    from codeagent.models import ScriptedModel
    from codeagent.run.solve import solve
    from codeagent.task import Task

    monkeypatch.setenv("CODEAGENT_TRAJECTORY_DIR", str(tmp_path / "trajs"))
    calls = [{"id": "c1", "type": "function", "function": {"name": "bash",
                                                            "arguments": json.dumps({"command": "git log --oneline | wc -l"})}}]
    model = ScriptedModel([{"role": "assistant", "content": "", "tool_calls": calls},
                           {"role": "assistant", "content": "", "tool_calls": [
                               {"id": "c2", "type": "function", "function": {"name": "submit", "arguments": "{}"}}]}])
    config = Config()
    config.agent.localize = False
    commit = git(history_repo, "rev-parse", "HEAD").strip()
    outcome = solve(Task(repo=str(history_repo), problem_statement="x", base_commit=commit), config, model)
    trajectory = [json.loads(line) for line in open(outcome.result.trajectory_path)]
    observed = [message for record in trajectory for message in record.get("messages", []) if message.get("role") == "tool"]
    assert observed[0]["content"].strip() == "1"  # one commit: the task's base, nothing of its history
    assert "repository_history" not in trajectory[0]["trajectory"]["task"].get("extra", {})
