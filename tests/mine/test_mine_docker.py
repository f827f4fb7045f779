"""`codeagent tasks mine` end to end, in Docker: a small Python history mined into a task that
`eval grade --gold` resolves and `--empty` does not."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.history import history_repo

pytestmark = pytest.mark.usefixtures("no_leaks")


def test_mined_task_is_validated_and_graded_by_eval(tmp_path, env):
    repo = history_repo(tmp_path)
    output = tmp_path / "mined" / "tasks.jsonl"
    mine = subprocess.run([sys.executable, "-m", "codeagent.cli", "tasks", "mine", str(repo), "--name", "synthetic/calc",
                           "--output", str(output), "--split-date", "2024-06-01"],
                          capture_output=True, text=True, env=env, timeout=1200)
    assert mine.returncode == 0, mine.stderr[-3000:]
    for phase in ("environment", "base run 3/3", "gold run 3/3", "grade gold", "grade empty", "kept: 1 FAIL_TO_PASS"):
        assert phase in mine.stderr
    [task] = [json.loads(line) for line in output.read_text().splitlines()]
    assert task["FAIL_TO_PASS"] == ["tests/test_calc.py::test_add"]
    assert task["PASS_TO_PASS"] == ["tests/test_calc.py::test_mul"]
    assert task["problem_statement"].startswith("Fix add() (#12)") and task["split"] == "train"
    validation = task["provenance"]["validation"]
    assert len(validation["runs"]) == 6 and validation["grades"] == {"gold": "resolved", "empty": "unresolved"}
    rejects = {json.loads(line)["reason"] for line in (tmp_path / "mined" / "tasks.rejects.jsonl").read_text().splitlines()}
    assert "docs-only" in rejects and any(reason.startswith("statement leaks the fix") for reason in rejects)
    assert (tmp_path / "mined" / "tasks.train.jsonl").read_text() == output.read_text()
    logs = tmp_path / "mined" / "tasks.logs" / task["instance_id"]
    assert "FAILED tests/test_calc.py::test_add" in (logs / "base-1.txt").read_text()
    assert (logs / "grade-gold" / "test_output.txt").is_file()

    repos = tmp_path / "repos" / "synthetic"
    repos.mkdir(parents=True)
    os.symlink(repo, repos / "calc")
    for flag, resolved, where in (("--gold", True, []), ("--empty", False, ["--repos", str(tmp_path / "repos")])):
        graded = tmp_path / f"graded{flag}"  # --gold: at the repository of the row's provenance
        proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "eval", "grade", "--dataset", str(output), flag,
                               *where, "--output", str(graded)],
                              capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        [report] = [json.loads(path.read_text()) for path in graded.glob("instances/*/report.json")]
        assert report["resolved"] is resolved, report


@pytest.mark.ray
def test_mine_with_the_ray_executor_validates_on_a_node_and_brings_the_logs_back(tmp_path, env):
    pytest.importorskip("ray", reason="the `ray` extra is not installed")
    repo = history_repo(tmp_path)
    output = tmp_path / "ray" / "tasks.jsonl"
    mine = subprocess.run([sys.executable, "-m", "codeagent.cli", "tasks", "mine", str(repo), "--name", "synthetic/calc",
                           "--output", str(output), "--executor", "ray", "--reruns", "2"],
                          capture_output=True, text=True, env={**env, "CODEAGENT_SANDBOX_SLOTS": "1"}, timeout=1200)
    assert mine.returncode == 0, mine.stderr[-3000:]
    assert "kept: 1 FAIL_TO_PASS" in mine.stderr and "1 kept" in mine.stdout
    [task] = [json.loads(line) for line in output.read_text().splitlines()]
    assert task["FAIL_TO_PASS"] == ["tests/test_calc.py::test_add"]
    assert [(run["side"], run["run"]) for run in task["provenance"]["validation"]["runs"]] == [
        ("base", 1), ("base", 2), ("gold", 1), ("gold", 2)]
    logs = tmp_path / "ray" / "tasks.logs" / task["instance_id"]  # written on the node, shipped back
    assert "FAILED tests/test_calc.py::test_add" in (logs / "base-1.txt").read_text()
    assert (logs / "grade-gold" / "test_output.txt").is_file()


LOOKUP = "import json\nfrom pathlib import Path\n\n\ndef lookup(name):\n    return json.loads((Path(__file__).parent / 'table.generated.json').read_text())[name]\n"
HELD_COMMITS = [
    ("table", {"calc.py": "def add(a, b):\n    return a + b\n", "table.generated.json": '{"a": 1}\n',
               "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"},
     "2024-01-01T00:00:00Z"),
    ("lookup() reads names from the generated table: lookup('b') is 2",
     {"calc.py": "def add(a, b):\n    return a + b\n\n\n" + LOOKUP, "table.generated.json": '{"a": 1, "b": 2}\n',
      "CHANGES.rst": "- lookup()\n",
      "tests/test_calc.py": "from calc import add, lookup\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
                            "def test_lookup():\n    assert lookup('b') == 2\n"},
     "2024-02-01T00:00:00Z"),
]


def test_a_held_generated_file_joins_the_gold_patch_only_because_the_tests_need_it(tmp_path, env):
    repo = history_repo(tmp_path, HELD_COMMITS)
    output = tmp_path / "held" / "tasks.jsonl"
    mine = subprocess.run([sys.executable, "-m", "codeagent.cli", "tasks", "mine", str(repo), "--name", "synthetic/calc",
                           "--output", str(output), "--reruns", "1"], capture_output=True, text=True, env=env, timeout=1200)
    assert mine.returncode == 0, mine.stderr[-3000:]
    assert "again with table.generated.json" in mine.stderr  # without it, no test changed: decided by running
    [task] = [json.loads(line) for line in output.read_text().splitlines()]
    assert sorted(task["FAIL_TO_PASS"]) == ["tests/test_calc.py::test_add", "tests/test_calc.py::test_lookup"]
    assert "table.generated.json" in task["patch"] and "CHANGES.rst" not in task["patch"]
    assert task["provenance"]["held_added"] == ["table.generated.json"]
    assert task["provenance"]["dropped_files"] == ["CHANGES.rst"]


def test_sigterm_stops_the_run_at_once_records_the_candidate_and_the_next_run_resumes_it(tmp_path, env):
    import signal
    import time

    import docker

    repo = history_repo(tmp_path)
    output = tmp_path / "stop" / "tasks.jsonl"
    command = [sys.executable, "-m", "codeagent.cli", "tasks", "mine", str(repo), "--name", "synthetic/calc",
               "--output", str(output), "--reruns", "3"]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:  # a container run in flight
        seen.append(line)
        if "] base run 2/3" in line:
            break
    assert any("base run 2/3" in line for line in seen), "".join(seen)[-2000:]
    time.sleep(1)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=60)
    stopped = time.monotonic() - sent
    assert proc.returncode == 143, rest
    assert stopped < 10, f"stopped after {stopped:.1f}s"
    owner = {"label": f"codeagent.owner={__import__('socket').gethostname()}:{proc.pid}"}
    assert docker.from_env().containers.list(all=True, sparse=True, filters=owner) == []  # nothing of the run is left
    records = [json.loads(line) for line in output.with_name("tasks.jsonl.state.jsonl").read_text().splitlines()]
    interrupted = [record["commit"] for record in records if record["status"] == "interrupted"]
    assert len(interrupted) == 1 and len(records) == 9  # the candidate in flight, and the 8 skipped ones
    assert output.read_text() == "" and len(output.with_name("tasks.rejects.jsonl").read_text().splitlines()) == 8
    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1200)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "8 done before, 1 candidates to validate" in again.stderr  # the interrupted one is validated again
    [task] = [json.loads(line) for line in output.read_text().splitlines()]
    assert task["provenance"]["commit"] == interrupted[0] and task["FAIL_TO_PASS"] == ["tests/test_calc.py::test_add"]
