import json
import sys

import pytest
from click.testing import CliRunner

from codeagent.cli.traj_commands import traj
from codeagent.trajectory import Trajectory, TrajectoryStore
from codeagent.trajectory.export import ExportError, dpo_rows, sft_rows, to_dpo, to_jsonl, to_sft
from tests.support.scripted import native_call as call
from tests.support.tools import TOOLS

datasets = pytest.importorskip("datasets")

START = [{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": "Issue: 1 + 1 == 3"}]


def run(store, run_id, instance, resolved, commands):
    with store.create(id=run_id, task={"instance_id": instance, "repo": "r"}, model="openai/qwen", tools=TOOLS, messages=START) as w:
        for index, (name, arguments) in enumerate(commands):
            cid = f"{run_id}-{index}"
            w.append_step({"cost": 0.1, "prompt_tokens": 10, "completion_tokens": 2}, [
                {"role": "assistant", "content": f"thinking {index}" if index else None, "tool_calls": [call(cid, name, arguments)]},
                {"role": "tool", "tool_call_id": cid, "content": f"result of {name}"},
            ])
        w.update(patch=f"patch {run_id}", exit_status="submitted")
    if resolved is not None:
        store.add_verification(run_id, {"resolved": resolved})
        store.add_rewards(run_id, {"outcome": float(resolved)})


@pytest.fixture
def store(tmp_path):
    store = TrajectoryStore(tmp_path / "store")
    run(store, "a-win", "i1", True, [("bash", {"command": "ls"}), ("edit", {"path": "x.py", "line": 3})])
    run(store, "a-lose", "i1", False, [("bash", {"command": "ls"})])
    run(store, "b-win", "i2", True, [("edit", {"path": "y.py", "line": 1})])
    run(store, "c-ungraded", "i3", None, [("bash", {"command": "pwd"})])
    return store


def without_nulls(value):
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def test_jsonl_round_trip(store, tmp_path):
    path = tmp_path / "out" / "all.jsonl"
    assert to_jsonl(store.iter(), path) == 4
    loaded = [Trajectory.model_validate_json(line) for line in path.read_text().splitlines()]
    assert loaded == store.list()


@pytest.mark.parametrize("name", ["sft.jsonl", "sft.parquet", "sft_dir"])
def test_sft_round_trip(store, tmp_path, name):
    path = tmp_path / name
    assert to_sft(store.iter(), path) == 2  # resolved only
    if path.suffix == ".jsonl":
        ds = datasets.load_dataset("json", data_files=str(path), split="train")
    elif path.suffix == ".parquet":
        ds = datasets.Dataset.from_parquet(str(path))
    else:
        ds = datasets.load_from_disk(str(path))
    rows = sorted(ds.to_list(), key=lambda row: row["id"])
    assert [row["id"] for row in rows] == ["a-win", "b-win"]
    original = store.load("a-win")
    messages = without_nulls(rows[0]["messages"])
    assert [m["role"] for m in messages] == [m["role"] for m in original.messages]
    assert messages[2]["tool_calls"] == original.messages[2]["tool_calls"]  # arguments kept verbatim
    assert messages[2]["content"] == ""  # None content becomes "" for chat templates
    assert messages[3] == original.messages[3]
    assert json.loads(rows[0]["tools"]) == TOOLS
    assert rows[0]["reward"] == 1.0 and rows[0]["resolved"] is True


def test_sft_can_include_unresolved(store):
    assert {row["id"] for row in sft_rows(store.iter(), require_resolved=False)} == {"a-win", "a-lose", "b-win", "c-ungraded"}


def test_dpo_pairs_share_the_prompt(store, tmp_path):
    rows = dpo_rows(store.iter())
    assert len(rows) == 1  # only i1 has both outcomes
    [row] = rows
    assert (row["chosen_id"], row["rejected_id"], row["instance_id"]) == ("a-win", "a-lose", "i1")
    assert row["prompt"] == START  # the runs diverge at the first assistant turn (call ids differ)
    assert row["chosen"][0]["tool_calls"][0]["id"] == "a-win-0"
    assert row["rejected"][0]["tool_calls"][0]["id"] == "a-lose-0"
    path = tmp_path / "dpo.parquet"
    assert to_dpo(store.iter(), path) == 1
    [saved] = datasets.Dataset.from_parquet(str(path)).to_list()
    assert without_nulls(saved["prompt"]) == START and len(saved["chosen"]) == 4 and len(saved["rejected"]) == 2


def test_missing_datasets_gives_install_hint(store, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(ExportError, match=r"pip install 'codeagent\[train\]'"):
        to_sft(store.iter(), tmp_path / "x.jsonl")


def test_cli_ls_show_export(store, tmp_path):
    runner = CliRunner(env={"COLUMNS": "200"})
    root = ["--store", str(store.root)]
    result = runner.invoke(traj, root + ["ls"])
    assert result.exit_code == 0, result.output
    for run_id in ("a-win", "a-lose", "b-win", "c-ungraded"):
        assert run_id in result.output
    assert "$0.2000" in result.output and "submitted" in result.output

    result = runner.invoke(traj, root + ["ls", "--resolved"])
    assert "a-win" in result.output and "a-lose" not in result.output

    result = runner.invoke(traj, root + ["show", "a-w"])
    assert result.exit_code == 0, result.output
    assert "Issue: 1 + 1 == 3" in result.output and "result of edit" in result.output
    assert "patch a-win" in result.output and '"line": 3' in result.output

    result = runner.invoke(traj, root + ["show", "nope"])
    assert result.exit_code != 0 and "no trajectory 'nope'" in result.output

    out = tmp_path / "cli.jsonl"
    result = runner.invoke(traj, root + ["export", "--format", "sft", "--output", str(out), "--instance", "i2"])
    assert result.exit_code == 0, result.output
    assert "exported 1 rows" in result.output and "b-win" in out.read_text()

    result = runner.invoke(traj, root + ["export", "--format", "sft", "--output", str(tmp_path / "e.jsonl"), "--instance", "i3"])
    assert result.exit_code != 0 and "--include-unresolved" in result.output
    assert not (tmp_path / "e.jsonl").exists()

    result = runner.invoke(traj, root + ["export", "--format", "jsonl", "--output", str(tmp_path / "raw.jsonl")])
    assert result.exit_code == 0 and len((tmp_path / "raw.jsonl").read_text().splitlines()) == 4


@pytest.mark.parametrize("name", ["quiet.jsonl", "quiet.parquet", "quiet-dir"])
def test_export_prints_no_progress_bars_of_datasets(store, tmp_path, capfd, name):
    from datasets.utils import are_progress_bars_disabled

    assert to_sft(store.iter(), tmp_path / name) == 2
    out, err = capfd.readouterr()
    assert "%|" not in out + err and "it/s" not in out + err and "examples/s" not in out + err, err
    assert not are_progress_bars_disabled()  # the library's setting is put back


def hack(store, run_id="a-hack", instance="i1"):
    """A conftest.py hack the harness graded resolved and flagged: its verdict and reward recorded as
    `eval run` records them (reward 0, `resolved` left as graded)."""
    from codeagent.evals.batch import _record_reward

    run(store, run_id, instance, None, [("edit", {"path": "conftest.py", "line": 1})])
    report = {"resolved": True, "outcome": "resolved", "touches_test_infrastructure": ["conftest.py"],
              "test_infrastructure": {"conftest.py": "conftest"}}
    _record_reward({"trajectories_dir": str(store.root)}, run_id, report)
    flagged = store.load(run_id)
    assert flagged.resolved is True and flagged.rewards == {"resolved": 0.0}
    assert flagged.integrity_flags == ["conftest.py (conftest)"]


def test_a_flagged_hack_is_no_positive_example_unless_allowed(store, tmp_path):
    """Issue 21, item 6: a resolved run the grader flagged is left out of SFT rows and never chosen in
    a DPO pair (a clean fix is preferred to it); --allow-flagged takes it, its flags in the row."""
    hack(store)
    assert {row["id"] for row in sft_rows(store.iter())} == {"a-win", "b-win"}
    allowed = {row["id"]: row for row in sft_rows(store.iter(), allow_flagged=True)}
    assert set(allowed) == {"a-win", "a-hack", "b-win"} and allowed["a-hack"]["flags"] == ["conftest.py (conftest)"]
    assert allowed["a-win"]["flags"] == []
    pairs = {(row["chosen_id"], row["rejected_id"]) for row in dpo_rows(store.iter())}
    assert pairs == {("a-win", "a-lose"), ("a-win", "a-hack")}
    assert ("a-hack", "a-lose") in {(r["chosen_id"], r["rejected_id"]) for r in dpo_rows(store.iter(), allow_flagged=True)}

    runner = CliRunner()
    root = ["--store", str(store.root)]
    out = tmp_path / "sft.jsonl"
    result = runner.invoke(traj, root + ["export", "--format", "sft", "--output", str(out), "--instance", "i1"])
    assert result.exit_code == 0, result.output
    assert "exported 1 rows" in result.output and "1 resolved run(s) the grader flagged" in result.output
    assert "a-hack" not in out.read_text()
    result = runner.invoke(traj, root + ["export", "--format", "sft", "--output", str(out), "--instance", "i1",
                                         "--allow-flagged"])
    assert result.exit_code == 0 and "exported 2 rows" in result.output and "a-hack" in out.read_text()
    result = runner.invoke(traj, root + ["export", "--format", "dpo", "--output", str(tmp_path / "d.jsonl")])
    assert result.exit_code == 0 and '"chosen_id":"a-hack"' not in (tmp_path / "d.jsonl").read_text().replace(" ", "")
