"""A new user's first commands: `codeagent` alone takes solve's flags, `codeagent doctor` says what to
fix, and `pip install .` in a fresh virtualenv gives a working `codeagent`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from codeagent.run.examples import example_repo


def codeagent(*args: str, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codeagent.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


@pytest.fixture
def env(tmp_path):
    return {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"} | {
        "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "trajs"), "CODEAGENT_CONFIG": str(tmp_path / "none.yaml")}


def test_codeagent_alone_takes_the_solve_flags(tmp_path, env):
    clone = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(example_repo("cart")), str(clone)], check=True)
    proc = codeagent("--repo", str(clone), "--issue", "fix remove()", "--headless", "--set", "limits.max_steps=2",
                     "--model", "openai/gpt-4o", env=env)
    assert proc.returncode == 3 and "needs OPENAI_API_KEY" in proc.stderr, proc.stderr  # solve ran, found no key
    proc = codeagent("--example", "cart", "--json", "--set", "limits.max_steps=2", env=env)
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 4 and events[-1]["exit_status"] == "max_steps", proc.stderr
    proc = codeagent("--headless", "eval", "--help", env=env)
    assert proc.returncode == 2 and "--headless: solve's options go after `codeagent solve`" in proc.stderr
    assert "Commands:" in codeagent(env=env).stdout  # no flag and no terminal: the help, as before
