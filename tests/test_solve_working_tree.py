"""`codeagent solve --headless` starts from what the user sees: uncommitted edits and untracked files
(not ignored ones), the patch holds only the agent's change, --apply keeps the user's edits, the user's
.git is not written, a symlink out of the repository brings no host file in; a folder outside git is
snapshotted. Real Docker sandbox, scripted OpenAI server on 127.0.0.1 (tests/support/fake_server.py)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fake_server import completion, tool_call
from tests.support.git import git

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(300)]

LOOK = "cat app.py; cat notes.txt; cat secret.log; cat leak; ls"
EDIT = "sed -i 's/hello/hello, world/' app.py"


@pytest.fixture
def env(tmp_path):
    environment = {**os.environ, "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "trajs"),
                   "CODEAGENT_CONFIG": str(tmp_path / "no-user-config.yaml"), "CODEAGENT_CACHE": str(tmp_path / "cache")}
    environment.pop("OPENAI_API_KEY", None)
    return environment


def run(server, folder, env, *flags):
    server.replies += [
        (200, completion({"content": "Looking.", "tool_calls": [tool_call(json.dumps({"command": LOOK}), call_id="a")]},
                         "tool_calls")),
        (200, completion({"content": "Editing.", "tool_calls": [tool_call(json.dumps({"command": EDIT}), call_id="b")]},
                         "tool_calls")),
        (200, completion({"content": "Done.", "tool_calls": [tool_call("{}", name="submit", call_id="c")]},
                         "tool_calls")),
    ]
    command = [sys.executable, "-m", "codeagent.cli", "solve", "--repo", str(folder), "--issue", "Greet the world.",
               "--model", "openai/test-model", "--api-base", server.base, "--set", "agent.localize=false", "--headless",
               *flags]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=240)


def dot_git(repo: Path) -> dict[str, str]:
    """Every file under .git with a hash of its bytes (the index, refs, logs, objects...)."""
    return {str(path.relative_to(repo)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted((repo / ".git").rglob("*")) if path.is_file()}


def test_solve_starts_from_the_working_tree_and_applies_only_the_agents_change(server, make_repo, env, tmp_path):
    repo = make_repo({"app.py": "print('hello')\n", ".gitignore": "*.log\n"})
    (tmp_path / "host-secret.txt").write_text("HOST-SECRET-42\n")
    (repo / "app.py").write_text("print('hello')\nprint('my uncommitted line')\n")
    (repo / "notes.txt").write_text("untracked notes\n")
    (repo / "secret.log").write_text("IGNORED-LOG\n")
    os.symlink(tmp_path / "host-secret.txt", repo / "leak")  # points out of the repository, at a host file
    git(repo, "add", "notes.txt")  # staged: the index differs from HEAD and from the working tree
    (repo / "notes.txt").write_text("untracked notes, edited\n")
    before, index, refs = dot_git(repo), (repo / ".git" / "index").read_bytes(), git(repo, "show-ref")

    proc = run(server, repo, env, "--apply")
    assert proc.returncode == 0, proc.stderr
    head = git(repo, "rev-parse", "HEAD").strip()
    assert f"started from the working tree with 3 changed files (uncommitted edits included; base {head[:10]})" \
        in proc.stderr
    looked = server.requests[1]["body"]["messages"][-1]["content"]
    looked = looked if isinstance(looked, str) else json.dumps(looked)
    assert "my uncommitted line" in looked and "untracked notes, edited" in looked
    assert "IGNORED-LOG" not in looked and "HOST-SECRET" not in looked
    assert "+print('hello, world')" in proc.stdout and "my uncommitted line" not in proc.stdout.split("@@")[0]
    assert "notes.txt" not in proc.stdout and "leak" not in proc.stdout  # the patch is the agent's change only
    assert "applied to" in proc.stderr
    assert (repo / "app.py").read_text() == "print('hello, world')\nprint('my uncommitted line')\n"
    assert (repo / "notes.txt").read_text() == "untracked notes, edited\n"
    assert dot_git(repo) == before and (repo / ".git" / "index").read_bytes() == index  # .git not written at all
    assert git(repo, "show-ref") == refs and not (repo / ".git" / "refs" / "stash").exists()


def test_a_folder_outside_git_is_snapshotted(server, env, tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "app.py").write_text("print('hello')\n")
    (folder / "notes.txt").write_text("untracked notes\n")
    (folder / ".gitignore").write_text("*.log\n")
    (folder / "secret.log").write_text("IGNORED-LOG\n")
    os.symlink(tmp_path / "nowhere.txt", folder / "leak")
    proc = run(server, folder, env, "--apply")
    assert proc.returncode == 0, proc.stderr
    assert "is not a git repository: started from a snapshot of the folder (4 files, .gitignore respected)" \
        in proc.stderr
    looked = json.dumps(server.requests[1]["body"]["messages"][-1]["content"])
    assert "untracked notes" in looked and "IGNORED-LOG" not in looked
    assert proc.stdout.startswith("diff --git a/app.py b/app.py") and proc.stdout.count("diff --git") == 1
    assert (folder / "app.py").read_text() == "print('hello, world')\n"
    assert not (folder / ".git").exists()


def test_apply_after_resuming_an_applied_session(server, make_repo, env):
    """The first run's patch was applied; the resumed run's --apply writes the follow-up's change on top
    (before: refused, the applied change counted as the user's uncommitted edit)."""
    repo = make_repo({"app.py": "print('hello')\n"})
    first = run(server, repo, env, "--apply")
    assert first.returncode == 0 and (repo / "app.py").read_text() == "print('hello, world')\n", first.stderr
    more = json.dumps({"command": "echo \"print('bye')\" >> app.py"})
    server.replies += [
        (200, completion({"content": "More.", "tool_calls": [tool_call(more, call_id="d")]}, "tool_calls")),
        (200, completion({"content": "Done.", "tool_calls": [tool_call("{}", name="submit", call_id="e")]},
                         "tool_calls")),
    ]
    command = [sys.executable, "-m", "codeagent.cli", "solve", "--repo", str(repo), "--resume", "--issue",
               "Say bye too.", "--model", "openai/test-model", "--api-base", server.base, "--set",
               "agent.localize=false", "--headless", "--apply"]
    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=240)
    assert second.returncode == 0, second.stderr
    assert (repo / "app.py").read_text() == "print('hello, world')\nprint('bye')\n"


def test_write_through_writes_each_change_as_it_happens(server, make_repo, env):
    """With --write-through the change is in the working tree as soon as the agent makes it: here the
    run stops at its step limit, never submits, and nothing is --apply'd, yet the file holds the edit."""
    repo = make_repo({"app.py": "print('hello')\n"})
    (repo / "app.py").write_text("print('hello')\n# mine\n")
    proc = run(server, repo, env, "--write-through", "--set", "limits.max_steps=2")
    assert proc.returncode == 4, proc.stderr
    assert f"write-through: applied to {repo}: app.py" in proc.stderr
    assert (repo / "app.py").read_text() == "print('hello, world')\n# mine\n"
