"""One reply cannot exhaust the host's memory (issue 21, item 3): a reply may carry any number of
tool calls, and each edit keeps the file's last version on the host. The calls per reply and per
run are capped; the editor's history is one per file, however its path is spelt, and bounded in bytes."""

from __future__ import annotations

import itertools
import json

import pytest

from codeagent.agent.loop import Agent
from codeagent.cli import EXIT_LIMIT, exit_code
from codeagent.config import Config
from codeagent.events import EventBus
from codeagent.models import ScriptedModel
from codeagent.sandbox import open_sandbox
from codeagent.task import Task
from codeagent.trajectory.store import TrajectoryStore

pytestmark = pytest.mark.usefixtures("no_leaks")
_ids = itertools.count(1)


def reply(*calls: tuple[str, dict]) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": f"call_{next(_ids)}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        for name, arguments in calls]}


def run(repo, turns, tmp_path, **limits):
    """The run's result, its trajectory, and the tool context its calls were given (their edit history)."""
    agent = Agent(ScriptedModel(turns), Config(agent={"localize": False}, limits=limits), events=EventBus(),
                  store=TrajectoryStore(tmp_path / "trajectories"))
    contexts = []
    call = agent.tools.call
    agent.tools.call = lambda name, arguments, context: (contexts.append(context), call(name, arguments, context))[1]
    with open_sandbox(repo) as sandbox:
        result = agent.run(Task(repo=str(repo), problem_statement="p"), sandbox)
    return contexts[-1] if contexts else None, result, agent.store.load(result.trajectory_id)


def tool_outputs(trajectory) -> list[str]:
    return [message["content"] for message in trajectory.messages if message["role"] == "tool"]


def test_a_reply_runs_at_most_its_cap_of_tool_calls_and_the_run_goes_on(make_repo, tmp_path):
    repo = make_repo({"main.py": "print('hi')\n"})
    many = reply(*[("bash", {"command": f"echo {i} >> log.txt"}) for i in range(40)])
    _, result, trajectory = run(repo, [many, reply(("bash", {"command": "wc -l < log.txt"})), reply(("submit", {}))],
                                tmp_path)
    assert Config().limits.max_tool_calls_per_reply == 32  # the default
    outputs = tool_outputs(trajectory)
    assert len(outputs) == 42  # every call is answered: the transcript stays valid
    refused = [text for text in outputs[:40] if "Not run: a reply may make at most 32 tool calls" in text]
    assert len(refused) == 8 and all("Not run" not in text for text in outputs[:32])
    assert "32" in outputs[40]  # only 32 lines were written
    assert result.exit_status == "submitted" and "+32" not in result.patch
    assert [len(step.tool_calls) for step in trajectory.steps] == [32, 1, 1]


def test_the_run_ends_at_its_cap_of_tool_calls_with_the_patch_kept(make_repo, tmp_path):
    repo = make_repo({"main.py": "print('hi')\n"})
    three = lambda start: reply(*[("bash", {"command": f"echo {i} >> main.py"}) for i in range(start, start + 3)])  # noqa: E731
    _, result, trajectory = run(repo, [three(0), three(3), three(6), reply(("submit", {}))], tmp_path,
                                max_tool_calls=5, max_tool_calls_per_reply=3)
    assert result.exit_status == "max_tool_calls" and exit_code(result.exit_status) == EXIT_LIMIT
    assert "made 5 tool calls" in result.message
    outputs = tool_outputs(trajectory)
    assert len(outputs) == 6 and "the run's limit of 5 tool calls is reached" in outputs[5]
    assert "+4" in result.patch and "+5" not in result.patch  # calls 1 to 5 ran, the sixth did not
    assert trajectory.exit_status == "max_tool_calls" and len(trajectory.steps) == 2


def test_one_reply_of_edits_holds_a_bounded_history_whatever_the_spellings(make_repo, tmp_path):
    """100 inserts on a 15 MB file in one reply took the host from ~450 MiB to 1,985 MiB."""
    from codeagent.tools.edit_history import MAX_BYTES

    repo = make_repo({"big.txt": "x" * 79 + "\n" + ("y" * 79 + "\n") * (6 * 2**20 // 80)})  # 6 MiB
    spellings = ["big.txt", "./big.txt", "/testbed/big.txt", "sub/../big.txt"]
    inserts = [("editor", {"command": "insert", "path": spellings[i % 4], "insert_line": 1, "new_str": f"line {i}"})
               for i in range(24)]
    undo = ("editor", {"command": "undo_edit", "path": "big.txt"})
    context, result, trajectory = run(repo, [reply(("bash", {"command": "mkdir sub"})), reply(*inserts), reply(undo),
                                             reply(("submit", {}))], tmp_path)
    assert all(text.startswith("Inserted") for text in tool_outputs(trajectory)[1:25])
    history = context.state["edit_history"]
    # 24 versions of 6 MiB would be 144 MiB; a spelling each would have kept 20 x 4
    assert 0 < history.bytes <= MAX_BYTES and len(history) == 9  # ten 6 MiB versions fit; the undo took one
    assert "Reverted the last edit of big.txt" in tool_outputs(trajectory)[25]  # the edit made as sub/../big.txt
    assert "+line 22" in result.patch and "+line 23" not in result.patch


def test_undo_follows_the_file_not_the_spelling_and_says_when_history_was_dropped(make_repo, tmp_path):
    repo = make_repo({"a.txt": "one\n"})
    edit = lambda path, new: ("editor", {"command": "str_replace", "path": path, "old_str": "one", "new_str": new})  # noqa: E731
    undo = lambda path: ("editor", {"command": "undo_edit", "path": path})  # noqa: E731
    insert = lambda i: ("editor", {"command": "insert", "path": ["a.txt", "./a.txt"][i % 2], "insert_line": 0,  # noqa: E731
                                   "new_str": f"{i}"})
    turns = [reply(edit("./a.txt", "two"), undo("/testbed/a.txt"), undo("a.txt")),
             reply(*[insert(i) for i in range(21)]), reply(*[undo("a.txt")] * 21), reply(("submit", {}))]
    _, result, trajectory = run(repo, turns, tmp_path)
    outputs = tool_outputs(trajectory)
    assert "Reverted the last edit of /testbed/a.txt" in outputs[1] and "no edit of a.txt to undo" in outputs[2]
    undone = outputs[24:]
    assert all(text.startswith("Reverted the last edit of a.txt") for text in undone[:20])
    assert "no edit of a.txt left to undo: its older versions were dropped" in undone[20]  # 20 kept of 21
    assert result.patch.endswith("@@ -1 +1,2 @@\n+0\n one\n")  # the first insert stays


def test_the_history_drops_the_oldest_versions_first_and_counts_its_bytes():
    from codeagent.tools.edit_history import EditHistory

    history = EditHistory(max_per_file=3, max_bytes=100)
    history.push("/t/a", b"a" * 40)
    history.push("/t/b", None)  # a file the editor created
    history.push("/t/a", b"a" * 30)
    history.push("/t/b", b"b" * 50)  # 120 bytes: a's oldest goes
    assert history.bytes == 80 and len(history) == 3 and history.was_cut("/t/a") and not history.was_cut("/t/b")
    for size in (1, 2, 3):
        history.push("/t/b", b"c" * size)  # b holds at most 3 versions: None then the 50 bytes go
    assert history.bytes == 36 and history.was_cut("/t/b")
    assert [history.pop("/t/b") for _ in range(4)] == [(True, b"ccc"), (True, b"cc"), (True, b"c"), (False, None)]
    assert history.pop("/t/a") == (True, b"a" * 30) and history.bytes == 0 and len(history) == 0
    history.push("/t/c", b"c" * 101)  # larger than the bound: not kept
    assert history.bytes == 0 and history.pop("/t/c") == (False, None) and history.was_cut("/t/c")
