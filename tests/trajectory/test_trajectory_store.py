import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone

import pytest

from codeagent.trajectory import Step, Trajectory, TrajectoryError, TrajectoryFilter, TrajectoryStore
from codeagent.trajectory.store import load_trajectory_file
from tests.support.tools import BASH

TASK = {
    "instance_id": "astropy__astropy-12907",
    "repo": "astropy/astropy",
    "base_commit": "d16bfe05a744909de4b27f5875fe0d4ed41ce607",
    "problem_statement": "Modeling's separability_matrix does not compute separability correctly",
    "FAIL_TO_PASS": ["test_separable[compound_model6]"],
}
TOOLS = [BASH]
START = [{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": "Fix the issue."}]


def call(call_id, command):
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}


def record_run(store, steps=2, **header):
    created = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    writer = store.create(
        task=header.pop("task", TASK), model=header.pop("model", "openai/qwen"), config={"max_steps": 50},
        sampling={"temperature": 0.7}, tools=TOOLS, messages=START, created=created, **header,
    )
    for index in range(steps):
        started = created + timedelta(seconds=10 * index)
        writer.append_step(
            {
                "started": started, "ended": started + timedelta(seconds=3), "model_seconds": 2.0,
                "tool_seconds": 1.0, "prompt_tokens": 100 + index, "completion_tokens": 10,
                "cost": 0.01, "token_ids": [1, 2, index], "logprobs": [-0.1, -0.2, -0.3],
                "tool_calls": [{"id": f"c{index}", "name": "bash", "exit_code": index, "timed_out": False, "seconds": 1.0}],
            },
            [
                {"role": "assistant", "content": f"step {index}", "tool_calls": [call(f"c{index}", f"cmd {index}")]},
                {"role": "tool", "tool_call_id": f"c{index}", "content": f"output {index}"},
            ],
        )
    writer.update(patch="diff --git a/x b/x\n", exit_status="submitted")
    writer.close()
    return writer.id


def test_round_trip(tmp_path):
    store = TrajectoryStore(tmp_path)
    trajectory_id = record_run(store, group_id="g1", candidate_index=3)
    store.add_verification(trajectory_id[:17], {"resolved": True, "FAIL_TO_PASS": {"success": 1}})
    store.add_rewards(trajectory_id, {"outcome": 1.0})
    t = store.load(trajectory_id)
    assert t.id == trajectory_id and t.schema_version == 1
    assert t.task == TASK and t.tools == TOOLS and t.model == "openai/qwen"
    assert [m["role"] for m in t.messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert [s.index for s in t.steps] == [0, 1]
    assert t.step_messages(t.steps[1])[0]["content"] == "step 1"
    assert t.steps[1].token_ids == [1, 2, 1] and t.steps[1].tool_calls[0].exit_code == 1
    assert (t.patch, t.exit_status, t.resolved, t.rewards) == ("diff --git a/x b/x\n", "submitted", True, {"outcome": 1.0})
    assert (t.group_id, t.candidate_index) == ("g1", 3)
    assert t.totals.steps == 2 and t.totals.prompt_tokens == 201 and t.totals.completion_tokens == 20
    assert t.totals.cost == pytest.approx(0.02) and t.totals.wall_seconds == pytest.approx(13.0)
    # Every store line is one complete JSON record.
    lines = (tmp_path / f"{trajectory_id}.jsonl").read_text().splitlines()
    assert [json.loads(line)["record"] for line in lines] == ["header", "step", "step", "update", "verification", "rewards"]
    # save() writes an equivalent file.
    copy = t.model_copy(update={"id": "copy-1"})
    store.save(copy)
    assert store.load("copy-1").model_dump(exclude={"id"}) == t.model_dump(exclude={"id"})


def test_ids_prefixes_and_filters(tmp_path):
    store = TrajectoryStore(tmp_path)
    a = record_run(store, id="run-a1")
    b = record_run(store, id="run-b1", model="gpt-4o", task={**TASK, "instance_id": "django__django-1"})
    store.add_verification(b, {"resolved": False})
    assert store.load("run-a").id == a
    with pytest.raises(TrajectoryError, match="matches 2"):
        store.load("run-")
    with pytest.raises(TrajectoryError, match="no trajectory"):
        store.load("zzz")
    with pytest.raises(TrajectoryError, match="invalid trajectory id"):
        store.create(id="../escape", task=TASK)
    with pytest.raises(TrajectoryError, match="already exists"):
        store.create(id="run-a1", task=TASK)
    assert [t.id for t in store.list(TrajectoryFilter(instance="django__*"))] == [b]
    assert [t.id for t in store.list(TrajectoryFilter(model="qwen"))] == [a]
    assert [t.id for t in store.list(TrajectoryFilter(resolved=False))] == [b]
    assert store.list(TrajectoryFilter(resolved=True)) == []
    assert len(store.list()) == 2


def test_corrupt_and_truncated_lines_are_skipped_with_a_warning(tmp_path, caplog):
    store = TrajectoryStore(tmp_path)
    trajectory_id = record_run(store, steps=3)
    path = tmp_path / f"{trajectory_id}.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    # lines: header, step0, step1, step2, update. Garble step1, cut the update record short.
    lines[2] = "{garbage\n"
    lines[4] = lines[4][: len(lines[4]) // 2]
    path.write_text("".join(lines))
    other = record_run(store, steps=1, id="other")
    (tmp_path / "broken.jsonl").write_text("not json at all\n")
    with caplog.at_level(logging.WARNING, logger="codeagent.trajectory"):
        t = store.load(trajectory_id)
        everything = store.list()
    assert [s.index for s in t.steps] == [0, 2]
    assert [m["content"] for m in t.messages if m["role"] == "tool"] == ["output 0", "output 2"]
    assert t.exit_status is None  # the update record was lost, nothing else
    assert f"{path}:3: skipped corrupt line" in caplog.text
    assert f"{path}:5: skipped truncated last line" in caplog.text
    assert "skipped trajectory broken" in caplog.text
    assert sorted(x.id for x in everything) == sorted([trajectory_id, other])
    # Appending after a cut-short line starts a fresh line, so the new record survives.
    with store.open(trajectory_id) as writer:
        writer.update(exit_status="resumed")
    assert store.load(trajectory_id).exit_status == "resumed"


def test_newer_schema_is_refused_clearly(tmp_path):
    path = tmp_path / "future.jsonl"
    path.write_text(json.dumps({"record": "header", "trajectory": {"id": "future", "schema_version": 99}}) + "\n")
    with pytest.raises(TrajectoryError, match="schema 99.*upgrade codeagent"):
        TrajectoryStore(tmp_path).load("future")


WRITER_CHILD = textwrap.dedent(
    """
    import sys
    from codeagent.trajectory import TrajectoryStore
    store = TrajectoryStore(sys.argv[1])
    writer = store.create(id="killed", task={"instance_id": "x"}, messages=[{"role": "user", "content": "go"}])
    big = "x" * 200_000  # large records make a kill in the middle of a write likely
    index = 0
    while True:
        writer.append_step({"prompt_tokens": index}, [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{index}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{index}", "content": big},
        ])
        index += 1
        if index == 5:
            print("ready", flush=True)
    """
)


def test_sigkill_while_appending_leaves_a_loadable_file(tmp_path):
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER_CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        time.sleep(0.3)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    path = tmp_path / "killed.jsonl"
    raw = path.read_bytes()
    complete_step_lines = raw.count(b"\n") - 1  # minus the header; a cut-short line has no newline
    t = TrajectoryStore(tmp_path).load("killed")
    assert len(t.steps) >= 5
    assert len(t.steps) == complete_step_lines
    assert [s.prompt_tokens for s in t.steps] == list(range(len(t.steps)))
    # Pairing intact: every tool message answers the assistant message just before it.
    for step in t.steps:
        assistant, tool = t.step_messages(step)
        assert tool["tool_call_id"] == assistant["tool_calls"][0]["id"]


def test_load_trajectory_file_accepts_exports(tmp_path):
    store = TrajectoryStore(tmp_path / "store")
    t = store.load(record_run(store))
    single = tmp_path / "one.json"
    single.write_text(t.model_dump_json())
    assert load_trajectory_file(single) == t
    lines = tmp_path / "two.jsonl"
    lines.write_text(t.model_dump_json() + "\n" + t.model_dump_json() + "\n")
    with pytest.raises(TrajectoryError, match="holds 2 trajectories"):
        load_trajectory_file(lines)


def test_writer_rejects_unknown_fields(tmp_path):
    store = TrajectoryStore(tmp_path)
    with store.create(task=TASK) as writer:
        with pytest.raises(TrajectoryError, match="updatable fields"):
            writer.update(task="other")
    with pytest.raises(TrajectoryError, match="not header fields"):
        store.create(task=TASK, bogus=1)


def test_step_model_defaults():
    step = Step(index=4)
    assert step.cost is None and step.token_ids is None and step.tool_calls == []
    assert Trajectory(id="x").resolved is None


def test_resume_last_is_this_repositorys_latest_session(tmp_path, monkeypatch):
    """One meaning of "last" for the TUI and headless: the newest session of this repository. A
    relative path recorded by an older version ("." of some other directory) matches nothing."""
    from codeagent.trajectory.sessions import find_session

    mine, other = tmp_path / "mine", tmp_path / "other"
    mine.mkdir(), other.mkdir()
    store = TrajectoryStore(tmp_path / "store")
    for trajectory_id, repo in (("a-mine", str(mine)), ("b-other", str(other)), ("c-dot", "."),
                                ("d-url", "https://example.com/x.git")):
        with store.create(id=trajectory_id, task={"instance_id": "t", "repo": repo, "problem_statement": "p"}):
            pass
    monkeypatch.chdir(mine)
    assert find_session(store, "last", ".") == "a-mine" and find_session(store, None, str(mine)) == "a-mine"
    assert find_session(store, "last", str(other)) == "b-other"
    assert find_session(store, "last", "https://example.com/x.git") == "d-url"
    assert find_session(store, "b-o", str(mine)) == "b-other"  # an explicit id is taken as given
    with pytest.raises(TrajectoryError, match="no saved session"):
        find_session(store, "last", str(tmp_path))


def test_a_writer_told_what_to_do_on_error_survives_a_full_disk(tmp_path):
    """/dev/full answers every write with ENOSPC: without `on_error` the writer raises; with it, it says
    why once and records nothing more, and the caller goes on (issue 21, item 5)."""
    import errno
    from pathlib import Path

    from codeagent.trajectory.store import TrajectoryWriter

    with pytest.raises(OSError) as raised:
        TrajectoryWriter(Path("/dev/full"), "t").update(patch="x")
    assert raised.value.errno == errno.ENOSPC
    heard = []
    writer = TrajectoryWriter(Path("/dev/full"), "t", on_error=heard.append)
    writer.append_step({"index": 0}, [])
    writer.update(patch="diff", exit_status="submitted")
    writer.close()
    assert writer.lost and "No space left on device" in writer.lost and len(heard) == 1
    store = TrajectoryStore(tmp_path / "not-a-folder")
    (tmp_path / "not-a-folder").write_text("")  # the store's root cannot be made
    with pytest.raises(OSError):
        store.create(task={"instance_id": "i"})
    writer = store.create(task={"instance_id": "i"}, on_error=heard.append)
    writer.update(patch="diff")
    assert writer.lost and len(heard) == 2
