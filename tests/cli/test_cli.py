"""The command line: instant help, honest placeholders, the example's main job, packaged assets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.resolve().parents[1]
HEAVY = ["litellm", "torch", "transformers", "trl", "textual", "peft", "datasets", "docker", "tree_sitter", "opentelemetry", "acp"]


def codeagent(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codeagent.cli", *args], capture_output=True, text=True, **kwargs)


@pytest.mark.parametrize("args", [[], ["train"], ["train", "grpo"], ["serve"]])
def test_help_imports_no_heavy_module(args):
    code = (f"import sys, runpy; sys.argv = ['codeagent', *{args!r}, '--help']\n"
            "try: runpy.run_module('codeagent.cli', run_name='__main__')\n"
            "except SystemExit: pass\n"
            "import json; print(json.dumps(sorted(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(proc.stdout.splitlines()[-1]))
    assert ("Options:" if args else "Commands:") in proc.stdout
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}


def test_sandbox_run_needs_exactly_one_source():
    proc = codeagent("sandbox", "run", "--", "true")
    assert proc.returncode == 2 and "exactly one of --repo or --example" in proc.stderr


def test_bad_repo_path_is_one_clear_line(tmp_path):
    proc = codeagent("sandbox", "run", "--repo", str(tmp_path / "typo"), "--", "true")
    assert proc.returncode == 3
    assert proc.stderr.strip() == f"error: repository path {tmp_path / 'typo'} does not exist"


def test_example_runs_its_tests_in_a_sandbox(no_leaks, tmp_path):
    proc = codeagent("sandbox", "run", "--example", "cart", env={**os.environ, "CODEAGENT_CACHE": str(tmp_path)})
    assert proc.returncode == 1, proc.stderr  # pytest's exit code: the example's bug shows
    assert "2 failed, 4 passed" in proc.stdout
    assert "test_remove_all_units_drops_the_line" in proc.stdout


def test_the_wheel_carries_the_asset_folders(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True)
    wheel = next(tmp_path.glob("codeagent-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "site")
    assert "codeagent/_assets/evals/environments/base.yaml" in names
    assert "codeagent/_assets/evals/examples/cart/task.yaml" in names
    assert "codeagent/_assets/evals/swebench/lite.test.jsonl.gz" in names
    assert "codeagent/_assets/languages/go.yaml" in names
    code = ("from codeagent.assets import asset_dir; print(asset_dir('evals'))\n"
            "from codeagent.data.swebench import load_rows; print(len(load_rows('lite')), len(load_rows('lite-dev')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path / "site"), "HF_HUB_OFFLINE": "1"})
    assert proc.stdout.split("\n")[:2] == [str(tmp_path / "site" / "codeagent" / "_assets" / "evals"), "300 23"]


def test_eval_select_reports_best_at_n_per_policy(tmp_path):
    rows = []
    for instance, outcomes in (("a-1", [True, False, False]), ("b-2", [False, False, False])):
        for index, resolved in enumerate(outcomes):
            patch = f"diff --git a/f.py b/f.py\n--- a/f.py\n+++ b/f.py\n@@ -1 +1 @@\n-x = 0\n+x = {index}\n"
            rows.append({"instance_id": instance, "index": index, "patch": patch, "resolved": resolved,
                         "scores": {"regression": 1.0 if resolved else 0.5}})
    candidates = tmp_path / "candidates.jsonl"
    candidates.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "result.json"
    proc = codeagent("eval", "select", "--candidates", str(candidates), "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["pass_at_n"]["count"] == 1 and result["policies"]["tests"]["best_at_n"] == 1
