"""What `codeagent eval` shows a user: a phase per instance, a plain tally, owner/name, and an offline
clone that says to pass --repos (not an environment defect)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.calc import cli_dataset

pytestmark = pytest.mark.usefixtures("no_leaks")


def grade(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codeagent.cli", "eval", "grade", *args], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "COLUMNS": "200"})


def test_eval_shows_each_phase_a_plain_tally_and_owner_slash_name(task, tmp_path):
    dataset, repos = cli_dataset(task, tmp_path, [{"repo": "synthetic/calc", "instance_id": "synthetic__calc-1"}])
    proc = grade("--dataset", str(dataset), "--gold", "--repos", str(repos), "--output", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    phases = [line for line in lines if line.startswith("[synthetic__calc-1] ")]
    assert phases[:3] == ["[synthetic__calc-1] cloning the repository", "[synthetic__calc-1] building the environment",
                          "[synthetic__calc-1] testing"], phases
    assert "resolved 1 · unresolved 0 · errors 0" in lines
    assert "{" not in proc.stderr  # no Python dict
    assert any("synthetic/calc" in line for line in lines) and not any("synthetic__calc " in line for line in lines)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert list(summary["per_repo"]) == ["synthetic/calc"]
    assert not list((tmp_path / "out").glob("instances/*/.phase"))  # nothing left behind


def test_an_offline_clone_says_pass_repos_not_environment_defect(task, tmp_path):
    dataset, _ = cli_dataset(task, tmp_path, [{"repo": "nobody-here/no-such-repo", "instance_id": "nobody__x-1"}])
    proc = grade("--dataset", str(dataset), "--gold", "--output", str(tmp_path / "out"))
    assert proc.returncode == 1, proc.stderr
    error = next(line for line in proc.stderr.splitlines() if line.startswith("error: nobody__x-1:"))
    assert "could not be cloned (offline, or no access?): pass --repos DIR" in error
    assert "could not clone https://github.com/nobody-here/no-such-repo" in error
    assert "environment defect" not in proc.stderr
    assert "resolved 0 · unresolved 0 · errors 1 (harness error 1)" in proc.stderr
