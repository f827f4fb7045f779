"""What the driver does with results shipped back from other nodes (no Ray or Docker needed)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from codeagent.evals.batch import grade_batch
from codeagent.evals.runner import BatchDir
from codeagent.executors.ray_executor import node_slots
from codeagent.task import Task


class Twice:
    """An executor that delivers every result twice (a retried task that had finished after all)."""

    ships_results = True

    def __init__(self):
        self.calls = 0

    def map_unordered(self, fn, items):
        for item in items:
            self.calls += 1
            task = item[0]
            result = {"report": {"instance_id": task["instance_id"], "resolved": True, "outcome": "resolved",
                                 "attempt": 1},
                      "files": {"test_output.txt": b"PASSED t\n"}}
            yield item, result, None
            yield item, {**result, "report": {**result["report"], "attempt": 2}}, None


def tasks(count: int) -> list[Task]:
    return [Task(repo="/nonexistent", base_commit="0" * 40, instance_id=f"x__y-{i}", problem_statement="p")
            for i in range(count)]


def test_a_result_that_arrives_twice_is_recorded_once(tmp_path, capsys):
    seen = []
    reports = grade_batch(tasks(2), {}, tmp_path, model_name="m", executor=Twice(), progress=seen.append)
    assert [r["attempt"] for r in reports] == [1, 1]
    assert len(seen) == 2
    assert capsys.readouterr().err.count("a second result arrived: ignored") == 2
    assert (tmp_path / "instances" / "x__y-0" / "test_output.txt").read_bytes() == b"PASSED t\n"


def test_a_result_for_an_instance_graded_by_another_run_is_ignored(tmp_path):
    batch = BatchDir(tmp_path)
    assert batch.record_result("a", {"instance_id": "a", "n": 1}, {"test_output.txt": b"first"})
    assert not batch.record_result("a", {"instance_id": "a", "n": 2}, {"test_output.txt": b"second"})
    assert batch.instance("a").report()["n"] == 1
    assert (batch.instance("a").root / "test_output.txt").read_bytes() == b"first"


@pytest.mark.parametrize("name", ["../escape", "/etc/x", "a/../../b", "report.json", "error.json", "sub/.", "",
                                  "a\\b", "odd name", "x/\nrm"])
def test_a_shipped_file_never_lands_outside_its_instance(tmp_path, name):
    batch = BatchDir(tmp_path / "out")
    with pytest.raises(ValueError, match="refusing a shipped file"):
        batch.record_result("a", {"instance_id": "a"}, {name: b"x"})
    assert batch.instance("a").report() is None
    assert not (tmp_path / "escape").exists()


def test_a_shipped_file_in_a_subdirectory_is_written(tmp_path):
    batch = BatchDir(tmp_path)
    assert batch.record_result("a", {"instance_id": "a"}, {"candidate-0/test_output.txt": b"log"})
    assert (batch.instance("a").root / "candidate-0" / "test_output.txt").read_bytes() == b"log"


def test_node_slots_follow_cpus_and_memory(monkeypatch):
    monkeypatch.delenv("CODEAGENT_SANDBOX_SLOTS", raising=False)
    assert node_slots(16, 128 * 1024**3) == 8  # CPUs bound
    assert node_slots(64, 16 * 1024**3) == 4  # memory bound
    assert node_slots(1, 1024**3) == 1  # a small node still takes one
    monkeypatch.setenv("CODEAGENT_SANDBOX_SLOTS", "3")
    assert node_slots(64, 512 * 1024**3) == 3


def test_help_does_not_import_ray():
    code = ("import sys; from click.testing import CliRunner; from codeagent.cli import cli; "
            "r = CliRunner().invoke(cli, ['eval', 'grade', '--help']); assert '--executor' in r.output, r.output; "
            "print(json.dumps(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.'))))")
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


@pytest.mark.parametrize("bad", ["../escape", "a/b", ".hidden", ""])
def test_a_shipped_trajectory_with_a_bad_id_is_refused(tmp_path, bad, capsys):
    from codeagent.evals.batch import _store_trajectories

    _store_trajectories({"trajectories_dir": str(tmp_path / "store")}, {bad: b"{}\n", "good-1": b"{}\n"})
    assert [p.name for p in (tmp_path / "store").iterdir()] == ["good-1.jsonl"]
    assert not (tmp_path / "escape.jsonl").exists()
    assert "a shipped trajectory is refused" in capsys.readouterr().err


def test_a_shipped_trajectory_never_overwrites_one_in_the_store(tmp_path):
    from codeagent.evals.batch import _store_trajectories

    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "t-1.jsonl").write_bytes(b"original\n")
    _store_trajectories({"trajectories_dir": str(tmp_path / "store")}, {"t-1": b"other\n"})
    assert (tmp_path / "store" / "t-1.jsonl").read_bytes() == b"original\n"


class BadName(Twice):
    def map_unordered(self, fn, items):
        for item in items:
            task = item[0]
            files = {"../../outside.txt": b"x"} if task["instance_id"] == "x__y-0" else {}
            yield item, {"report": {"instance_id": task["instance_id"], "resolved": True, "outcome": "resolved"},
                         "files": files}, None


def test_a_result_that_cannot_be_recorded_is_that_instances_error_only(tmp_path):
    reports = grade_batch(tasks(2), {}, tmp_path / "out", model_name="m", executor=BadName())
    assert reports[0]["outcome"] == "error" and "refusing a shipped file" in reports[0]["reason"]
    assert reports[1]["outcome"] == "resolved"
    assert not (tmp_path / "outside.txt").exists()


def test_prebuild_tells_each_task_whose_images_fail_and_goes_on():
    """--prebuild with the local executor: one result for this machine; a task without an environment
    spec is that task's error (it fails when graded, as without --prebuild), the others are still built."""
    from codeagent.evals.prebuild import prebuild
    from codeagent.executors.local import LocalExecutor

    tasks = [Task(repo=f"/nonexistent/{name}", base_commit="0" * 40, instance_id=f"nowhere__{name}-1",
                  problem_statement="x") for name in ("a", "b")]
    [result] = prebuild(tasks, LocalExecutor(1))
    assert result["built"] == [] and sorted(result["errors"]) == ["nowhere__a-1", "nowhere__b-1"]
    assert all(error.startswith("SpecError: no environment spec") for error in result["errors"].values())


def test_the_scratch_of_a_killed_grader_is_swept(tmp_path, monkeypatch):
    """A worker killed mid-grade leaves its scratch folder; the next grade on that node removes it
    (folders of live processes, this one included, stay)."""
    import tempfile

    from codeagent.private_dirs import make_private_dir, private_root, remove_dead_owners

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = private_root() / "grade-999999999-abc"
    dead.mkdir()
    (dead / "test_output.txt").write_text("x")
    mine = make_private_dir("grade")
    assert remove_dead_owners("grade") == 1
    assert not dead.exists() and mine.exists()
