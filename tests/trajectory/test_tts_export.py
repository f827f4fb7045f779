"""Every branch and round of test-time scaling is a trajectory with its lineage, and exports for training:
preferences between siblings (runs that started from the same state) for DPO."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from codeagent.cli.traj_commands import traj
from codeagent.trajectory import TrajectoryStore
from codeagent.trajectory.export import dpo_rows, sibling_key
from codeagent.trajectory.reading import fold_records
from tests.support.scripted import native_call as call
from tests.support.tools import TOOLS

datasets = pytest.importorskip("datasets")

START = [{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": "Issue: 1 + 1 == 3"}]


def step(run_id: str, number: int, command: str) -> list[dict]:
    cid = f"{run_id}-{number}"
    return [{"role": "assistant", "content": "", "tool_calls": [call(cid, "bash", {"command": command})]},
            {"role": "tool", "tool_call_id": cid, "content": f"ran {command}"}]


def record(store, run_id, messages, commands, *, resolved=None, value=None, **lineage):
    with store.create(id=run_id, task={"instance_id": "i1", "repo": "r"}, model="m", tools=TOOLS, messages=messages,
                      group_id="g", **lineage) as writer:
        for number, command in enumerate(commands):
            writer.append_step({"completion_tokens": 3}, step(run_id, number, command))
        writer.update(patch=f"patch {run_id}", exit_status="submitted")
    results = {key: v for key, v in (("resolved", resolved), ("value", value)) if v is not None}
    if results:
        store.add_verification(run_id, results)
    return store.load(run_id)


@pytest.fixture
def tree(tmp_path):
    """Two samples from the issue; two branches from the first sample's state after its first step."""
    store = TrajectoryStore(tmp_path / "store")
    root = record(store, "s0", START, ["look", "edit wrong"], resolved=False, value=0.4, tts="search", round=0)
    record(store, "s1", START, ["edit right"], resolved=True, value=0.9, tts="search", round=1)
    prefix = root.messages[:4]
    record(store, "b0", prefix, ["edit right"], resolved=True, value=0.8, tts="search", round=2, parents=["s0"],
           branch_messages=4)
    record(store, "b1", prefix, ["edit wrong again"], resolved=False, value=0.3, tts="search", round=2,
           parents=["s0"], branch_messages=4)
    return store


def test_lineage_round_trips_and_old_records_read_without_it(tree, tmp_path):
    branch = tree.load("b0")
    assert (branch.tts, branch.round, branch.parents, branch.branch_messages) == ("search", 2, ["s0"], 4)
    assert sibling_key(branch) == ("g", ("s0",), 4) and sibling_key(tree.load("s1")) == ("g", (), None)
    old = tmp_path / "old.jsonl"  # a header written before these fields existed
    old.write_text(json.dumps({"record": "header", "trajectory": {"schema_version": 1, "id": "old", "messages": START}})
                   + "\n")
    read = fold_records(old)
    assert (read.tts, read.round, read.parents, read.branch_messages) == (None, None, [], None)


def test_sibling_pairs_share_the_branch_point_as_their_prompt(tree):
    rows = dpo_rows(tree.iter(), siblings=True)
    pairs = {(row["chosen_id"], row["rejected_id"]): row for row in rows}
    assert set(pairs) == {("s1", "s0"), ("b0", "b1")}  # never across states: b0 is no sibling of s0
    branch = pairs[("b0", "b1")]
    assert len(branch["prompt"]) == 4 and branch["prompt"][2]["tool_calls"][0]["id"] == "s0-0"  # the shared step
    assert branch["chosen"][0]["tool_calls"][0]["function"]["arguments"] == json.dumps({"command": "edit right"})
    assert branch["group_id"] == "g"
    by_task = {(row["chosen_id"], row["rejected_id"]) for row in dpo_rows(tree.iter())}
    assert ("b0", "s0") in by_task  # the task-wide pairs still cross states


def test_value_preferences_for_ungraded_runs(tree):
    rows = dpo_rows(tree.iter(), siblings=True, prefer="value")
    assert {(row["chosen_id"], row["rejected_id"]) for row in rows} == {("s1", "s0"), ("b0", "b1")}


def test_cli_exports_sibling_pairs(tree, tmp_path):
    out = tmp_path / "pairs.jsonl"
    result = CliRunner().invoke(traj, ["--store", str(tree.root), "export", "--format", "dpo", "--pairs", "siblings",
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "exported 2 rows" in result.output and len(out.read_text().splitlines()) == 2
    jsonl = tmp_path / "all.jsonl"
    assert CliRunner().invoke(traj, ["--store", str(tree.root), "export", "--format", "jsonl", "-o", str(jsonl)]).exit_code == 0
    rounds = {json.loads(line)["id"]: json.loads(line)["round"] for line in jsonl.read_text().splitlines()}
    assert rounds == {"s0": 0, "s1": 1, "b0": 2, "b1": 2}
