"""`codeagent solve` from the outside: messages, JSON events, --apply and its refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from codeagent.run.examples import example_replay, example_repo, example_task
from tests.support.git import git

pytestmark = pytest.mark.usefixtures("no_leaks")


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "trajs"),
            "CODEAGENT_CONFIG": str(tmp_path / "no-user-config.yaml")}


def solve(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codeagent.cli", "solve", *args], capture_output=True,
                          text=True, env=env, timeout=300)


@pytest.fixture
def checkout(tmp_path):
    """A user's checkout of the example repository, with the issue in a file."""
    clone = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(example_repo("cart")), str(clone)], check=True)
    issue = tmp_path / "issue.md"
    issue.write_text(example_task("cart")["problem_statement"])
    return clone, issue


def test_no_model_configured_is_one_clear_message(checkout, env):
    clone, issue = checkout
    proc = solve("--repo", str(clone), "--issue-file", str(issue), env=env)
    assert proc.returncode == 3 and "no model configured: pass --model" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_repo_that_is_not_git_and_missing_issue(tmp_path, env):
    proc = solve("--repo", str(tmp_path), "--issue", "fix it", "--model", "gpt-4o", env=env)
    assert proc.returncode == 3 and "is not a git repository" in proc.stderr
    proc = solve("--repo", str(tmp_path), env=env)
    assert proc.returncode == 2 and "exactly one of --issue, --issue-file or --example" in proc.stderr


def test_example_replay_headless_and_json(env):
    proc = solve("--example", "cart", "--headless", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "REPLAY" in proc.stderr and "exit status: submitted" in proc.stderr
    assert proc.stderr.index("preparing the docker sandbox") < proc.stderr.index("codeagent · task")
    assert proc.stdout.startswith("diff --git a/shop/cart.py b/shop/cart.py")
    proc = solve("--example", "cart", "--json", env=env)
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events[0]["kind"] == "run_started" and events[0]["replay"] is True
    assert events[-1]["kind"] == "finished" and events[-1]["exit_status"] == "submitted"
    assert {"tool_called", "observation", "patch_changed"} <= {event["kind"] for event in events}


def test_apply_patches_a_clean_checkout(checkout, env):
    clone, issue = checkout
    proc = solve("--repo", str(clone), "--issue-file", str(issue), "--model", f"replay:{example_replay('cart')}",
                 "--apply", env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"applied to {clone}: shop/cart.py" in proc.stderr
    assert "del self._lines[sku]" in (clone / "shop" / "cart.py").read_text()


def test_apply_keeps_the_local_changes_the_run_started_from(checkout, env):
    """The run starts from the working tree: the local edit is in the sandbox, not in the patch, and
    --apply writes the agent's change beside it (before: refused as "uncommitted changes")."""
    clone, issue = checkout
    (clone / "shop" / "cart.py").write_text((clone / "shop" / "cart.py").read_text() + "# my local work\n")
    proc = solve("--repo", str(clone), "--issue-file", str(issue), "--model", f"replay:{example_replay('cart')}",
                 "--apply", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "started from the working tree with 1 changed file" in proc.stderr
    assert "my local work" not in proc.stdout and f"applied to {clone}: shop/cart.py" in proc.stderr
    text = (clone / "shop" / "cart.py").read_text()
    assert "del self._lines[sku]" in text and text.endswith("# my local work\n")
    assert git(clone, "status", "--porcelain") == " M shop/cart.py\n"


def test_resume_continues_the_last_session(env):
    first = solve("--example", "cart", "--headless", "--set", "limits.max_steps=3", env=env)
    assert first.returncode == 4 and "exit status: max_steps" in first.stderr  # a limit reached
    session = first.stderr.split("trajectory: ")[1].split()[0]
    resumed = solve("--repo", str(example_repo("cart")), "--resume", "last", "--issue", "Please finish the fix.",
                    "--headless", "--model", f"replay:{example_replay('cart')}", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert f"trajectory: {session}" in resumed.stderr and "del self._lines[sku]" in resumed.stdout
    missing = solve("--resume", "nope", "--headless", env=env)
    assert missing.returncode == 3 and "error:" in missing.stderr


def test_resume_last_never_picks_another_repositorys_session(checkout, env):
    """`--resume` alone means what the TUI's /resume means: this repository's latest session. Another
    repository's newer session is not continued (its patch would be applied there, --apply included)."""
    clone, _ = checkout
    other = solve("--example", "cart", "--headless", "--set", "limits.max_steps=3", env=env)
    assert "trajectory: " in other.stderr
    proc = solve("--repo", str(clone), "--resume", "--issue", "Please finish the fix.", "--headless",
                 "--model", f"replay:{example_replay('cart')}", "--apply", env=env)
    assert proc.returncode == 3 and f"no saved session for {clone}" in proc.stderr, proc.stderr
    assert git(clone, "status", "--porcelain") == ""


def test_model_at_the_top_level_and_a_missing_key_before_any_sandbox(checkout, env, tmp_path):
    clone, issue = checkout
    env = {key: value for key, value in env.items() if key != "OPENAI_API_KEY"}
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "--model", "openai/gpt-4o", "solve", "--repo",
                           str(clone), "--issue-file", str(issue), "--headless"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 3, proc.stderr
    assert "needs OPENAI_API_KEY" in proc.stderr and "export OPENAI_API_KEY=" in proc.stderr
    assert "api_key" not in proc.stderr.replace("OPENAI_API_KEY", "")  # no advice to set an unknown key
    assert not (tmp_path / "trajs").exists()  # found before the run began: no sandbox, no trajectory


def test_a_refused_connection_names_the_server_and_exits_as_a_model_error(checkout, env):
    import socket

    clone, issue = checkout
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = solve("--repo", str(clone), "--issue-file", str(issue), "--model", "hosted_vllm/served",
                 "--api-base", f"http://127.0.0.1:{port}/v1", "--set", "model.retries=0", "--headless", env=env)
    assert proc.returncode == 5, proc.stderr
    assert f"cannot connect to 127.0.0.1:{port}" in proc.stderr and "API key" not in proc.stderr


def test_ctrl_c_exits_130(checkout, env):
    import signal
    import socket
    import time

    clone, issue = checkout
    with socket.socket() as server:  # accepts connections, never answers: the model call hangs
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        proc = subprocess.Popen([sys.executable, "-m", "codeagent.cli", "solve", "--repo", str(clone), "--issue-file",
                                 str(issue), "--model", "hosted_vllm/served", "--api-base",
                                 f"http://127.0.0.1:{server.getsockname()[1]}/v1", "--headless"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 120
        while "step 1" not in (line := proc.stderr.readline()) and time.monotonic() < deadline and line:
            pass
        time.sleep(1)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "exit status: interrupted" in stderr


# The disk under the trajectory store fills once the run's header is written: every record after it,
# and the patch file beside it, get ENOSPC (a record cut half-way, as a full disk cuts it).
DISK_FILLS = """
import errno, os, runpy, sys
from codeagent import patches
from codeagent.trajectory import store

STORE = os.environ["CODEAGENT_TRAJECTORY_DIR"]
real_append, real_write, written = store._append_line, patches.write, []

def full(path):
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

def append_line(fd, record):
    if written:
        os.write(fd, store.dumps_record(record).encode()[:20])
        raise full(STORE)
    written.append(record["record"])
    real_append(fd, record)

def write(path, patch):
    if str(path).startswith(STORE):
        raise full(path)
    return real_write(path, patch)

store._append_line, patches.write = append_line, write
sys.argv = ["codeagent", *sys.argv[1:]]
runpy.run_module("codeagent.cli", run_name="__main__")
"""


@pytest.mark.parametrize("how", ["fills", "unwritable", "unwritable, 2 candidates"])
def test_the_patch_survives_a_trajectory_store_that_cannot_be_written(checkout, env, tmp_path, how):
    """Issue 21, item 5: a store whose disk fills mid-run, or a store that cannot exist at all (a folder
    under /dev/full): the run goes on, the patch is printed, kept in a file elsewhere (this user's
    private temporary folder) and said where, --apply applies it, exit 0; no traceback."""
    clone, issue = checkout
    env = {**env, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    args = ["solve", "--repo", str(clone), "--issue-file", str(issue), "--model", f"replay:{example_replay('cart')}",
            "--apply"]
    if how.endswith("candidates"):
        args += ["--set", "scaling.candidates=2"]
    if how == "fills":
        command = [sys.executable, "-c", DISK_FILLS, *args]
    else:
        env["CODEAGENT_TRAJECTORY_DIR"] = "/dev/full/trajectories"
        command = [sys.executable, "-m", "codeagent.cli", *args]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout.startswith("diff --git a/shop/cart.py b/shop/cart.py") and "del self._lines[sku]" in proc.stdout
    assert "the trajectory cannot be written" in proc.stderr and "warning: the trajectory was not saved whole" in proc.stderr
    kept = proc.stderr.split("patch written to ")[1].split()[0]
    assert kept.startswith(str(tmp_path / "tmp")) and open(kept).read() == proc.stdout
    assert f"{kept} (not beside its trajectory: " in proc.stderr
    assert f"applied to {clone}: shop/cart.py" in proc.stderr and "del self._lines[sku]" in (clone / "shop/cart.py").read_text()


def test_the_trajectory_store_is_private_to_the_user(checkout, env, tmp_path):
    """Files 0600 and folders 0700 (the record, its .patch, images/), even with a umask of 022."""
    import stat
    import struct
    import zlib

    clone, issue = checkout
    chunk = lambda kind, data: struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))  # noqa: E731
    png = tmp_path / "shot.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
                    + chunk(b"IDAT", zlib.compress(b"\x00\x00")) + chunk(b"IEND", b""))
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "solve", "--repo", str(clone), "--issue-file",
                           str(issue), "--model", f"replay:{example_replay('cart')}", "--image", str(png),
                           "--headless"], capture_output=True, text=True, env=env, timeout=300,
                          preexec_fn=lambda: os.umask(0o022))
    assert proc.returncode == 0, proc.stderr
    store = tmp_path / "trajs"
    modes = {str(path.relative_to(store)): stat.S_IMODE(path.stat().st_mode) for path in [store, *store.rglob("*")]}
    assert {name.rsplit(".", 1)[-1] for name in modes if "." in name} >= {"jsonl", "patch", "png"}
    assert "images" in modes
    assert {name: mode for name, mode in modes.items()
            if mode != (0o700 if (store / name).is_dir() else 0o600)} == {}
