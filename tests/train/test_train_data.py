"""Task data for training: SWE-Gym, SWE-smith and R2E-Gym rows into Task (small files in their
formats, written here), held-out splits, `train` reading what `traj export` wrote, and SFT that never
imitates a malformed turn. CPU only, no Docker."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from codeagent.train import TrainError
from tests.support.tools import SUBMIT

SWE_GYM_ROW = {
    "instance_id": "getmoto__moto-5752", "repo": "getmoto/moto", "base_commit": "b2300f1eae1323e3e8bc45f97e530ce129dff12e",
    "patch": "diff --git a/moto/ssm/models.py b/moto/ssm/models.py\n", "test_patch": "diff --git a/tests/t.py b/tests/t.py\n",
    "problem_statement": "SSM parameter names with a dot are rejected", "hints_text": "", "created_at": "2022-12-10",
    "version": "4.0", "FAIL_TO_PASS": json.dumps(["tests/test_ssm.py::test_dot"]), "PASS_TO_PASS": "[]",
    "environment_setup_commit": "b2300f1eae1323e3e8bc45f97e530ce129dff12e",
}
BUG = ("diff --git a/src/calc.py b/src/calc.py\nindex 1111111..2222222 100644\n--- a/src/calc.py\n+++ b/src/calc.py\n"
       "@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a + b\n+    return a - b\n")
SWE_SMITH_ROW = {
    "instance_id": "owner__calc.1a2b3c4d.func_pm_op_swap__abc123", "repo": "swesmith/owner__calc.1a2b3c4d",
    "patch": BUG, "FAIL_TO_PASS": ["tests/test_calc.py::test_add", "tests/test_more.py::test_sum"],
    "PASS_TO_PASS": ["tests/test_calc.py::test_mul"], "created_at": "2025-03-01",
    "image_name": "swesmith.x86_64.owner__calc.1a2b3c4d", "problem_statement": "add() subtracts",
}
R2E_ROW = {
    "repo_name": "aiohttp", "docker_image": "namanjain12/aiohttp_final:f0d74880deec8fcd982bce639c93c5e130d41198",
    "commit_hash": "f0d74880deec8fcd982bce639c93c5e130d41198", "problem_statement": "[ISSUE]Cookies are lost[/ISSUE]",
    "expected_output_json": json.dumps({"test_cookies.py::test_keep": "PASSED", "test_cookies.py::test_old": "PASSED",
                                        "test_cookies.py::test_xfail": "FAILED"}),
    "parsed_commit_content": json.dumps({"file_diffs": []}), "modified_files": ["aiohttp/cookiejar.py"],
}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_swe_gym_rows_are_swebench_tasks_with_their_image(tmp_path):
    from codeagent.data import load_tasks

    [task] = load_tasks(write_jsonl(tmp_path / "gym.jsonl", [SWE_GYM_ROW]), "swe-gym")
    assert task.instance_id == "getmoto__moto-5752" and task.repo == "https://github.com/getmoto/moto.git"
    assert task.FAIL_TO_PASS == ["tests/test_ssm.py::test_dot"] and task.gold_patch.startswith("diff --git a/moto")
    assert task.docker_image == "xingyaoww/sweb.eval.x86_64.getmoto_s_moto-5752"
    assert task.task_format == "swe-gym" and task.version == "4.0"


def test_swe_smith_rows_fix_by_reversing_the_bug_patch(tmp_path):
    from codeagent.data import load_tasks

    [task] = load_tasks(write_jsonl(tmp_path / "smith.jsonl", [SWE_SMITH_ROW]))  # format detected
    assert task.task_format == "swe-smith"
    assert task.repo == "https://github.com/swesmith/owner__calc.1a2b3c4d.git"
    assert task.base_commit == SWE_SMITH_ROW["instance_id"]  # the mirror's branch holding the bug
    assert task.docker_image == "jyangballin/swesmith.x86_64.owner_1776_calc.1a2b3c4d:latest"
    assert task.test_command == ("pytest --disable-warnings --color=no --tb=no --verbose "
                                 "tests/test_calc.py tests/test_more.py")
    # The fix undoes the bug: applied to the buggy file with git, it gives back the original.
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / "fix.diff").write_text(task.gold_patch)
    subprocess.run(["git", "apply", "fix.diff"], cwd=repo, check=True, capture_output=True)
    assert (repo / "src" / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert "index 2222222..1111111" in task.gold_patch


def test_r2e_gym_rows_grade_against_their_expected_output(tmp_path):
    from codeagent.data import load_tasks

    [task] = load_tasks(write_jsonl(tmp_path / "r2e.jsonl", [R2E_ROW]))
    assert task.task_format == "r2e-gym" and task.repo == "aiohttp"
    assert task.docker_image == R2E_ROW["docker_image"] and task.extra["workdir"] == "/testbed"
    assert task.test_command == "bash run_tests.sh" and task.extra["hidden_tests_dir"] == "/r2e_tests"
    assert task.FAIL_TO_PASS == ["test_cookies.py::test_keep", "test_cookies.py::test_old"]
    assert task.expected_output["test_cookies.py::test_xfail"] == "FAILED"
    assert task.instance_id == "aiohttp__f0d74880deec"


@pytest.mark.parametrize("row, fmt, message", [
    ({**SWE_SMITH_ROW, "patch": ""}, "swe-smith", "field 'patch'"),
    ({**R2E_ROW, "expected_output_json": "{nope"}, "r2e-gym", "not JSON"),
    ({**SWE_GYM_ROW, "FAIL_TO_PASS": "[1, 2]"}, "swe-gym", "list of test names"),
])
def test_bad_rows_say_which_row_and_field(tmp_path, row, fmt, message):
    from codeagent.data import TaskFormatError, load_tasks

    with pytest.raises(TaskFormatError, match=rf"task 1: .*{message}"):
        load_tasks(write_jsonl(tmp_path / "bad.jsonl", [row]), fmt)


def _tasks(count_per_repo: dict[str, int]):
    from codeagent.task import Task

    return [Task(repo=f"https://github.com/{repo}.git", problem_statement="p", instance_id=f"{repo}-{i}",
                 extra={"swebench_repo": repo}) for repo, count in count_per_repo.items() for i in range(count)]


def test_held_out_split_keeps_repositories_on_one_side_and_is_deterministic():
    from codeagent.data import split_tasks

    tasks = _tasks({"a/x": 3, "b/y": 2, "c/z": 4, "d/w": 1, "e/v": 2})
    train, held = split_tasks(tasks, 0.25, seed=1)
    assert len(held) >= 3 and len(train) + len(held) == len(tasks)
    assert not {t.swebench_repo for t in train} & {t.swebench_repo for t in held}
    again = split_tasks(list(reversed(tasks)), 0.25, seed=1)
    assert sorted(t.instance_id for t in again[1]) == sorted(t.instance_id for t in held)
    with pytest.raises(ValueError, match="one group holds every task"):
        split_tasks(_tasks({"a/x": 4}), 0.5)
    assert len(split_tasks(_tasks({"a/x": 4}), 1, group=None)[1]) == 1


def test_grpo_tasks_come_from_a_swe_smith_file_with_a_held_out_split(tmp_path):
    from codeagent.train.data import rl_tasks
    from codeagent.train.recipe import DataSection

    rows = [{**SWE_SMITH_ROW, "instance_id": f"owner__calc.1a2b3c4d.bug__{i}",
             "repo": f"swesmith/owner__calc{i % 3}.1a2b3c4d"} for i in range(6)]
    path = write_jsonl(tmp_path / "smith.jsonl", rows)
    train = rl_tasks(DataSection(tasks=str(path), held_out=0.3, split_seed=3))
    held = rl_tasks(DataSection(tasks=str(path), held_out=0.3, split_seed=3, split="held_out"))
    assert train and held and len(train) + len(held) == 6
    assert not {t.instance_id for t in train} & {t.instance_id for t in held}
    assert all(t.task_format == "swe-smith" for t in train + held)


# -- train reads what traj export wrote; no malformed turns in SFT ------------------------------------

TOOLS = [SUBMIT]


def _store(root: Path, *, malformed: bool = False) -> Path:
    from codeagent.trajectory.store import TrajectoryStore

    store = TrajectoryStore(root)
    for task, resolved in ((1, True), (2, True), (3, False)):
        messages = [{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": f"Fix bug {task}."}]
        with store.create(task={"instance_id": f"task-{task}", "repo": "o/r"}, model="scripted", tools=TOOLS,
                          messages=messages) as writer:
            if malformed and task == 1:
                writer.append_step({"finish_reason": "stop", "format_error": "no tool call"},
                                   [{"role": "assistant", "content": "I think the bug is..."},
                                    {"role": "user", "content": "Call a tool."}])
            call = {"id": "c1", "type": "function", "function": {"name": "submit", "arguments": "{}"}}
            writer.append_step({"finish_reason": "stop"}, [
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "name": "submit", "content": "Submitted."}])
            writer.update(exit_status="submitted", patch="diff --git a/x b/x\n")
            writer.add_verification({"resolved": resolved})
            writer.add_rewards({"resolved": 1.0 if resolved else 0.0})
    return root


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    from codeagent.train.tiny import build_tiny

    return AutoTokenizer.from_pretrained(build_tiny(tmp_path_factory.mktemp("tiny"), vocab_size=300))


@pytest.mark.parametrize("fmt, name", [("sft", "rows.jsonl"), ("sft", "rows.parquet"), ("sft", "rows_dir"),
                                       ("jsonl", "runs.jsonl")])
def test_sft_reads_an_exported_dataset(tmp_path, tokenizer, fmt, name):
    from codeagent.train.data import sft_rows
    from codeagent.train.recipe import DataSection
    from codeagent.trajectory import export
    from codeagent.trajectory.store import TrajectoryStore

    store = TrajectoryStore(_store(tmp_path / "store"))
    output = tmp_path / name
    count = (export.to_sft(store.iter(), output, require_resolved=False) if fmt == "sft"
             else export.to_jsonl(store.iter(), output))
    assert count == 3
    from_store, _ = sft_rows(DataSection(store=str(store.root)), tokenizer)
    from_export, summary = sft_rows(DataSection(dataset=str(output)), tokenizer)
    assert summary["rows"] == 2 and summary["dropped"] == {"not verified as resolved": 1}
    assert sorted(r["input_ids"] for r in from_export) == sorted(r["input_ids"] for r in from_store)


def test_a_missing_or_foreign_dataset_is_a_clear_error(tmp_path, tokenizer):
    from codeagent.train.data import sft_rows
    from codeagent.train.recipe import DataSection

    with pytest.raises(TrainError, match="nothing at .*traj export"):
        sft_rows(DataSection(dataset=str(tmp_path / "missing.jsonl")), tokenizer)
    write_jsonl(tmp_path / "other.jsonl", [{"text": "hello"}])
    with pytest.raises(TrainError, match="row 1 is not an exported trajectory or SFT row"):
        sft_rows(DataSection(dataset=str(tmp_path / "other.jsonl")), tokenizer)


def test_sft_leaves_out_a_resolved_run_with_a_malformed_turn(tmp_path, tokenizer):
    from codeagent.train.data import sft_rows
    from codeagent.train.recipe import DataSection, load_recipe

    store = _store(tmp_path / "store", malformed=True)
    rows, summary = sft_rows(DataSection(store=str(store)), tokenizer)
    assert [r["instance_id"] for r in rows] == ["task-2"]
    assert summary["dropped"]["more than 0 malformed turn(s)"] == 1
    kept, _ = sft_rows(DataSection(store=str(store), max_format_errors=None), tokenizer)
    assert len(kept) == 2
    assert load_recipe("sft-toy").data.max_format_errors == 0


def test_sft_and_dpo_leave_out_a_flagged_hack_unless_allowed(tmp_path, tokenizer):
    """Issue 21, item 6: `train sft` takes no run the grader flagged (from the store, or from an export
    made with --allow-flagged: its flags travel in the row); `train dpo` never chooses one;
    data.allow_flagged takes them."""
    from codeagent.evals.batch import _record_reward
    from codeagent.train.data import dpo_rows, sft_rows
    from codeagent.train.recipe import DataSection
    from codeagent.trajectory import export
    from codeagent.trajectory.store import TrajectoryStore

    root = _store(tmp_path / "store")
    store = TrajectoryStore(root)
    hacked = next(t.id for t in store.iter() if t.instance_id == "task-3")  # unresolved: resolved by a hack
    _record_reward({"trajectories_dir": str(root)}, hacked, {
        "resolved": True, "outcome": "resolved", "touches_test_infrastructure": ["conftest.py"],
        "test_infrastructure": {"conftest.py": "conftest"}})
    rows, summary = sft_rows(DataSection(store=str(root)), tokenizer)
    assert sorted(r["instance_id"] for r in rows) == ["task-1", "task-2"] and hacked not in summary["trajectory_ids"]
    assert summary["dropped"] == {"flagged by the grader (data.allow_flagged: true takes them)": 1}
    rows, _ = sft_rows(DataSection(store=str(root), allow_flagged=True), tokenizer)
    assert sorted(r["instance_id"] for r in rows) == ["task-1", "task-2", "task-3"]

    exported = tmp_path / "sft.jsonl"
    assert export.to_sft(store.iter(), exported, allow_flagged=True) == 3
    rows, summary = sft_rows(DataSection(dataset=str(exported)), tokenizer)
    assert len(rows) == 2 and summary["dropped"] == {"flagged by the grader (data.allow_flagged: true takes them)": 1}

    with store.create(task={"instance_id": "task-3", "repo": "o/r"}, model="scripted", tools=TOOLS,
                      messages=[{"role": "system", "content": "You fix bugs."},
                                {"role": "user", "content": "Fix bug 3."}]) as writer:  # a real fix of task 3
        call = {"id": "c9", "type": "function", "function": {"name": "submit", "arguments": "{}"}}
        writer.append_step({"finish_reason": "stop"}, [{"role": "assistant", "content": "Fixed it.", "tool_calls": [call]},
                                                      {"role": "tool", "tool_call_id": "c9", "content": "Submitted."}])
        writer.add_verification({"resolved": True})
        fixed = writer.id
    _, summary = dpo_rows(DataSection(store=str(root)), tokenizer)
    assert summary["pairs"] == [[fixed, hacked]]
    with pytest.raises(TrainError, match="no preference pairs"):  # allowed, both count as resolved: no preference
        dpo_rows(DataSection(store=str(root), allow_flagged=True), tokenizer)
