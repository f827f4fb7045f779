"""The model as the adversary: nothing its tool calls do reaches this machine's files through the
tools (the navigate mirror, code navigation, the editor). A ScriptedModel drives the real agent
loop against a real Docker sandbox; every observation the model saw is checked."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codeagent.agent.loop import Agent
from codeagent.config import Config
from codeagent.events import EventBus
from codeagent.models import ScriptedModel
from codeagent.sandbox import open_sandbox
from codeagent.task import Task
from codeagent.trajectory.store import TrajectoryStore
from tests.support.scripted import call

pytestmark = pytest.mark.usefixtures("no_leaks")


def run(repo: Path, turns: list[dict], tmp_path: Path) -> list[str]:
    """Run the scripted model to the end; the observations it was shown, one per tool call."""
    model = ScriptedModel([*turns, call("submit")])
    agent = Agent(model, Config(agent={"localize": False}), events=EventBus(lambda event: None),
                  store=TrajectoryStore(tmp_path / "trajectories"))
    with open_sandbox(str(repo)) as sandbox:
        result = agent.run(Task(repo=str(repo), problem_statement="navigate the code"), sandbox)
    assert result.exit_status == "submitted", result.message
    observations = [str(m.get("content")) for m in model.calls[-1] if m.get("role") == "tool"]
    assert len(observations) == len(turns)
    return observations


def lying_git_turns(fake_output: str, how: str) -> list[dict]:
    """bash turns that make the sandbox's `git` print `fake_output`, as a shell function or as the binary."""
    printf = "printf " + repr_shell(fake_output.replace("\0", "\\000"))
    if how == "function":
        return [call("bash", command=f"git() {{ {printf}; }}; git status | tr '\\0' '|'")]
    script = f"#!/bin/bash\n{printf}\n"
    return [call("bash", command=f"mv /usr/bin/git /usr/bin/git.real && printf '%s' {repr_shell(script)} > /usr/bin/git "
                                 "&& chmod +x /usr/bin/git && git status | tr '\\0' '|'")]


def repr_shell(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


@pytest.mark.parametrize("how", ["function", "binary"])
def test_a_lying_git_status_writes_and_removes_nothing_on_the_host(make_repo, tmp_path, how):
    repo = make_repo({"pkg/core.py": "def add(a, b):\n    return a + b\n"})
    host = tmp_path / "host"
    host.mkdir()
    victim = host / "victim.txt"
    victim.write_text("keep me\n")
    written, climbed = host / "written-by-sandbox.py", host / "climbed.py"
    climb = "../" * 30 + str(climbed).lstrip("/")
    fake = f" M {written}\0 M {climb}\0 D {victim}\0 D {'../' * 30}{str(victim).lstrip('/')}\0 M pkg/core.py\0"
    plant = (f"mkdir -p {host} && printf 'def planted():\\n    pass\\n' > {written} && cp {written} {climbed} "
             "&& printf 'def mul(a, b):\\n    return a * b\\n' > pkg/core.py")
    turns = [call("bash", command=plant), *lying_git_turns(fake, how),
             call("navigate", command="outline", path="pkg/core.py"),
             call("navigate", command="definition", symbol="planted")]
    if how == "binary":
        turns.append(call("bash", command="mv /usr/bin/git.real /usr/bin/git"))
    observations = run(repo, turns, tmp_path)

    assert "| M pkg/core.py|" in observations[1]  # the sandbox's git really lies
    assert victim.read_text() == "keep me\n"
    assert sorted(p.name for p in host.iterdir()) == ["victim.txt"]
    assert "mul" in observations[2]  # the real change still came through
    assert "No definition of 'planted'" in observations[3]


def test_navigate_refuses_paths_outside_the_repository(make_repo, tmp_path):
    secret = tmp_path / "host_secret.py"
    secret.write_text("def host_only_secret_function():\n    return 'TOPSECRET'\n")
    repo = make_repo({"pkg/core.py": "def add(a, b):\n    return a + b\n"})
    paths = [str(secret), "../" * 30 + str(secret).lstrip("/"), "/etc/passwd", "../../etc/passwd",
             "pkg/../../../etc/passwd"]
    observations = run(repo, [call("navigate", command="outline", path=p) for p in paths]
                       + [call("navigate", command="outline", path="/testbed/pkg/core.py")], tmp_path)
    for observation in observations[:len(paths)]:
        assert "host_only_secret_function" not in observation and "root:" not in observation
        assert "outside the repository" in observation or "leaves the repository" in observation, observation
    assert "add" in observations[-1]  # the sandbox's own absolute path still works


def test_a_committed_symlink_to_a_host_file_is_never_followed(make_repo, tmp_path):
    secret = tmp_path / "outside" / "secret.py"
    secret.parent.mkdir()
    secret.write_text("def leaked_host_function():\n    return 'SECRET_TOKEN_41'\n")
    repo = make_repo({"pkg/core.py": "def add(a, b):\n    return a + b\n"})
    os.symlink(secret, repo / "leak.py")
    os.symlink(secret.parent, repo / "leakdir")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "links"], cwd=repo, check=True)
    turns = [call("navigate", command="outline", path="leak.py"),
             call("navigate", command="outline", path="leakdir/secret.py"),
             call("navigate", command="definition", symbol="leaked_host_function"),
             call("navigate", command="references", symbol="leaked_host_function"),
             call("navigate", command="repo_map", focus="leaked_host_function in leak.py"),
             call("navigate", command="localize", focus="leaked_host_function SECRET_TOKEN_41 leak.py")]
    observations = run(repo, turns, tmp_path)
    assert all("SECRET_TOKEN_41" not in observation for observation in observations)
    assert all("not a file in the repository" in observation for observation in observations[:2])
    assert observations[2].startswith("No definition") and observations[3].startswith("No references")
    assert all("leak" not in observation for observation in observations[4:])


def test_localization_on_the_host_tree_leaves_symlinks_out(make_repo, tmp_path):
    from codeagent.code.localize import localize
    from codeagent.sandbox.workspace import host_tree, snapshot

    secret = tmp_path / "secret_module.py"
    secret.write_text("def leaked_host_function():\n    return 1\n")
    repo = make_repo({"pkg/core.py": "def add(a, b):\n    return a + b\n"})
    os.symlink(secret, repo / "leak.py")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "link"], cwd=repo, check=True)
    tree = host_tree(snapshot(repo))
    assert not (tree / "leak.py").is_symlink() and not (tree / "leak.py").exists()
    os.symlink(secret, tree / "planted.py")  # even a link that got into a tree is not followed
    try:
        found = localize(tree, "leaked_host_function is broken in planted.py", k=5)
    finally:
        (tree / "planted.py").unlink()
    assert all(c.path not in {"leak.py", "planted.py"} for c in found)


def test_huge_files_are_capped_not_pulled_into_memory(make_repo, tmp_path):
    repo = make_repo({"pkg/core.py": "def add(a, b):\n    return a + b\n"})
    turns = [call("bash", command="yes 'x = 1' | head -c 40000000 > big.py && ls -la big.py"),
             call("navigate", command="outline", path="big.py"),
             call("editor", command="view", path="big.py"),
             call("navigate", command="outline", path="pkg/core.py"),
             call("bash", command="rm big.py")]
    observations = run(repo, turns, tmp_path)
    assert "too large to outline" in observations[1] and "40,000,000 bytes" in observations[1]
    assert "too large for the editor" in observations[2]
    assert "add" in observations[3]


def test_the_sandbox_read_stops_at_the_cap(make_repo):
    repo = make_repo({"small.txt": "hello\n"})
    with open_sandbox(str(repo)) as sandbox:
        sandbox.run("head -c 5000000 /dev/zero > big.bin")
        with pytest.raises(OSError) as caught:
            sandbox.read_file("big.bin", max_bytes=1_000_000)
        assert caught.value.errno == errno.EFBIG and "5,000,000 bytes" in str(caught.value)
        assert sandbox.read_file("small.txt", max_bytes=6) == b"hello\n"
        sandbox.run("ln -s big.bin link.bin")  # a small link to a big file: still capped (or not a file)
        with pytest.raises(OSError) as caught:
            sandbox.read_file("link.bin", max_bytes=1_000_000)
        assert caught.value.errno == errno.EFBIG or isinstance(caught.value, FileNotFoundError)


SIGTERM_SCRIPT = """
import json, signal, sys
from codeagent.agent.loop import Agent
from codeagent.cli import _terminate
from codeagent.config import Config
from codeagent.events import EventBus
from codeagent.models import ScriptedModel
from codeagent.sandbox import open_sandbox
from codeagent.task import Task
from codeagent.trajectory.store import TrajectoryStore

signal.signal(signal.SIGTERM, _terminate)
turn = lambda name, **a: {"role": "assistant", "content": "", "tool_calls": [
    {"id": name + str(len(a)), "type": "function", "function": {"name": name, "arguments": json.dumps(a)}}]}
model = ScriptedModel([turn("navigate", command="repo_map"), turn("bash", command="echo READY; sleep 120")])
agent = Agent(model, Config(agent={"localize": False}), events=EventBus(lambda e: print(e.kind, flush=True)),
              store=TrajectoryStore(sys.argv[2]))
with open_sandbox(sys.argv[1]) as sandbox:
    agent.run(Task(repo=sys.argv[1], problem_statement="x"), sandbox)
"""


def _mirrors_of(pid: int) -> list[Path]:
    from codeagent.private_dirs import private_root as private_temp_dir

    return list(private_temp_dir().glob(f"mirror-{pid}-*"))


def test_mirror_removed_on_sigterm_and_swept_after_kill_9(make_repo, tmp_path):
    from codeagent.private_dirs import private_root as private_temp_dir

    repo = make_repo({"pkg/core.py": "def add(a, b):\n    return a + b\n"})
    parent = private_temp_dir()
    assert parent.stat().st_mode & 0o777 == 0o700 and parent.stat().st_uid == os.getuid()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with open(tmp_path / f"child-{sig}.log", "w") as log:
            child = subprocess.Popen([sys.executable, "-c", SIGTERM_SCRIPT, str(repo), str(tmp_path / "t")],
                                     stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while not _mirrors_of(child.pid) and child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            assert _mirrors_of(child.pid), (tmp_path / f"child-{sig}.log").read_text()
            time.sleep(2)  # now in the sleeping bash call
            child.send_signal(sig)
            child.wait(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        if sig == signal.SIGTERM:
            assert not _mirrors_of(child.pid)
        else:
            subprocess.run(["docker", "rm", "-f", *_containers_of(child.pid)], capture_output=True)
            assert _mirrors_of(child.pid)  # nothing runs on kill -9: the next mirror sweeps it
            run(repo, [call("navigate", command="repo_map")], tmp_path)
            assert not _mirrors_of(child.pid)


def _containers_of(pid: int) -> list[str]:
    import socket

    from codeagent.sandbox.docker import LABEL
    from codeagent.sandbox.engine import docker_client

    owner = f"{socket.gethostname()}:{pid}"
    return [c.id for c in docker_client().containers.list(all=True, filters={"label": LABEL})
            if c.labels.get("codeagent.owner") == owner] or ["none"]
