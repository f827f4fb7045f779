"""Subagents (agent/subagents.py): each works in its own sandbox, a copy of the parent's state at hand-off."""

from __future__ import annotations

import itertools
import json
import threading

import pytest

from codeagent.agent.loop import Agent
from codeagent.config import Config
from codeagent.events import EventBus
from codeagent.sandbox import open_sandbox
from codeagent.task import Task
from codeagent.trajectory.store import TrajectoryStore
from tests.support.scripted import answer
from tests.support.subagents import Routed, call, reply

pytestmark = pytest.mark.usefixtures("no_leaks")
_ids = itertools.count(1)


def test_two_subagents_edit_the_same_file_in_parallel_each_in_its_own_copy(make_repo, tmp_path):
    repo = make_repo({"f.txt": "base\n"})
    both_running = threading.Barrier(2, timeout=120)  # each subagent's first turn waits for the other's

    def together(turn):
        def wait(_messages):
            both_running.wait()
            return turn
        return wait

    children = {
        "append A": [together(reply(call("bash", command="echo A >> f.txt"))),
                     reply(call("bash", command="cat f.txt")), answer("I appended A.")],
        "append B": [together(reply(call("bash", command="echo B >> f.txt"))),
                     reply(call("bash", command="cat f.txt")),
                     reply(call("subagent", task="nested")),  # not offered at depth 1
                     answer("I appended B.")],
        "look only": [reply(call("bash", command="echo X >> f.txt")),
                      reply(call("editor", command="create", path="g.txt", file_text="x\n")),
                      answer("I could not write.")],
    }
    parent = [
        reply(call("bash", command="echo parent >> f.txt")),
        reply(call("subagent", task="append A"), call("subagent", task="append B")),
        reply(call("bash", command="cat f.txt")),
        lambda messages: reply(call("subagent", apply=_name_of(messages, "I appended A."))),
        reply(call("bash", command="cat f.txt")),
        reply(call("subagent", task="look only", tools="read_only")),
        reply(call("submit")),
    ]
    model = Routed(parent, children)
    seen = []
    config = Config(agent={"localize": False, "subagents": True})
    agent = Agent(model, config, events=EventBus(seen.append), store=TrajectoryStore(tmp_path / "trajectories"))
    with open_sandbox(repo) as sandbox:
        result = agent.run(Task(repo=str(repo), problem_statement="p"), sandbox)
    store = agent.store
    trajectory = store.load(result.trajectory_id)
    outputs = [m["content"] for m in trajectory.messages if m["role"] == "tool"]

    # the parent's files did not change while the subagents ran
    assert outputs[3].startswith("base\nparent") and "A" not in outputs[3] and "B" not in outputs[3]
    # each subagent saw the parent's state and its own change only
    reports = {name: output for name, output in zip(("A", "B"), outputs[1:3])}
    assert "I appended A." in reports["A"] and "I appended B." in reports["B"]
    children_runs = {t.task["problem_statement"]: t for t in store.iter()
                     if t.parent_id == trajectory.id}
    assert set(children_runs) == {"append A", "append B", "look only"}
    for letter in "AB":
        child = children_runs[f"append {letter}"]
        cat = [m["content"] for m in child.messages if m["role"] == "tool"][1]
        assert cat.startswith(f"base\nparent\n{letter}") and ("B" if letter == "A" else "A") not in cat.replace("base", "")
        assert child.parent_step == 1 and "+" + letter in child.patch and "parent" not in child.patch.replace(
            " parent", "")  # against the hand-off: the parent's line is context, not added
    assert children_runs["append A"].patch != children_runs["append B"].patch
    # the patch reached the parent only when applied: one of the two, not both
    assert "Applied" in outputs[4] and outputs[5].startswith("base\nparent\nA") and "B" not in outputs[5]
    assert "A" in result.patch and "+B" not in result.patch
    # depth: no subagent tool at depth 1; the nested call started nothing
    assert "subagent" not in model.tools_offered["append B"]
    assert any(spec["function"]["name"] == "subagent" for spec in trajectory.tools)
    assert [e.kind for e in seen].count("subagent_started") == 3
    # read-only: its calls to write were refused and it has no patch
    readonly = children_runs["look only"]
    refused = [m["content"] for m in readonly.messages if m["role"] == "tool"]
    assert all("Not run" in text or "plan mode" in text for text in refused)
    assert not (readonly.patch or "").strip() and "changed no file" in outputs[6]
    finished = [e for e in seen if e.kind == "subagent_finished"]
    assert {e.trajectory_id for e in finished} == {t.id for t in children_runs.values()}
    from codeagent.view.data import summary  # `codeagent view` and /api/runs name the parent run

    assert summary(readonly)["parent_id"] == trajectory.id and summary(readonly)["parent_step"] == 5


def _name_of(messages, report: str) -> str:
    for message in messages:
        if message["role"] == "tool" and report in str(message["content"]):
            return str(message["content"]).split()[1]
    raise AssertionError(f"no observation holds {report!r}")


def test_an_untrusted_repository_cannot_turn_subagents_on_or_pick_their_model(tmp_path, monkeypatch):
    from codeagent.config import load_config

    monkeypatch.setenv("CODEAGENT_CONFIG", str(tmp_path / "user" / "config.yaml"))
    repo = tmp_path / "cloned"
    repo.mkdir()
    (repo / ".codeagent.yaml").write_text("agent: {subagents: true, subagent_model: theirs, subagent_steps: 9000}\n")
    warnings = []
    config = load_config(repo, warn=warnings.append)
    assert (config.agent.subagents, config.agent.subagent_model, config.agent.subagent_steps) == (False, None, 60)
    assert "agent.subagents" in warnings[0] and "agent.subagent_model" in warnings[0]
    assert load_config(repo, trust=True, warn=warnings.append).agent.subagents is True


def test_through_the_cli_a_subagent_reports_its_patch_and_the_parent_applies_it(server, make_repo, tmp_path):
    """`solve --headless` with the user's config turning subagents on, with their own model (real Docker, a
    scripted OpenAI server)."""
    import os
    import re
    import subprocess
    import sys

    from tests.support.fake_server import completion, tool_call

    def use(tool: str, **arguments):
        return 200, completion({"content": "", "tool_calls": [tool_call(json.dumps(arguments), name=tool,
                                                                        call_id=f"call_{next(_ids)}")]}, "tool_calls")

    user = tmp_path / "user" / "config.yaml"
    user.parent.mkdir()
    user.write_text("agent: {subagents: true, subagent_model: openai/other-model}\n")
    env = {**os.environ, "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "trajs"), "CODEAGENT_CONFIG": str(user)}
    env.pop("OPENAI_API_KEY", None)
    repo = make_repo({"f.txt": "base\n"})
    server.replies += [
        use("bash", command="echo parent >> f.txt"),
        use("subagent", task="Append the line child to f.txt."),
        use("bash", command="echo child >> f.txt"),  # the subagent's turns
        (200, completion({"content": "Appended child to f.txt."})),
        use("bash", command="cat f.txt"),  # the parent's again
        use("subagent", apply="sub-1"),
        use("bash", command="cat f.txt"),
        use("submit"),
    ]
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "solve", "--headless", "--set", "agent.localize=false",
                           "--repo", str(repo), "--model", "openai/test-model", "--api-base", server.base,
                           "--issue", "Add two lines."], capture_output=True, text=True, env=env, timeout=280)
    assert proc.returncode == 0, proc.stderr
    assert "    ↳ subagent sub-1 (full, openai/other-model): Append the line child to f.txt." in proc.stderr
    assert re.search(r"    ↳ subagent sub-1 finished: answered, 2 steps", proc.stderr)
    bodies = [r["body"] for r in server.requests if r["path"].endswith("/chat/completions")]
    child = bodies[2]
    assert [body["model"] for body in bodies] == ["test-model"] * 2 + ["other-model"] * 2 + ["test-model"] * 4
    assert child["messages"][0]["content"].startswith("You are a subagent of codeagent")
    assert child["messages"][1]["content"] == "Append the line child to f.txt."
    assert "subagent" not in [tool["function"]["name"] for tool in child["tools"]]
    observed = [m["content"] for m in bodies[5]["messages"] if m["role"] == "tool"]
    assert "Appended child to f.txt." in observed[1] and "+child" in observed[1] and "+parent" not in observed[1]
    assert "base\nparent" in observed[2] and "child" not in observed[2]  # not applied yet
    final = [m["content"] for m in bodies[7]["messages"] if m["role"] == "tool"]
    assert "Applied sub-1" in final[3] and "base\nparent\nchild" in final[4]
    from codeagent.trajectory.store import TrajectoryStore

    runs = TrajectoryStore(tmp_path / "trajs").list()
    parent = next(run for run in runs if run.parent_id is None)
    sub = next(run for run in runs if run.parent_id is not None)
    assert (sub.parent_id, sub.parent_step) == (parent.id, 1) and "+child" in sub.patch
    assert "+parent" in parent.patch and "+child" in parent.patch
    from codeagent.trajectory.sessions import find_session

    assert find_session(TrajectoryStore(tmp_path / "trajs"), "last", str(repo)) == parent.id  # not the subagent's


def test_the_subagents_share_one_step_budget_and_a_refused_call_starts_nothing(make_repo, tmp_path):
    repo = make_repo({"f.txt": "base\n"})
    children = {"one": [reply(call("bash", command="echo one >> f.txt")), answer("never asked")]}
    parent = [reply(call("subagent", task="one", max_steps=5)),
              reply(call("subagent", task="two")),
              reply(call("subagent", apply="sub-9")),
              reply(call("submit"))]
    model = Routed(parent, children)
    config = Config(agent={"localize": False, "subagents": True, "subagent_steps": 1})
    seen = []
    agent = Agent(model, config, events=EventBus(seen.append), store=TrajectoryStore(tmp_path / "trajectories"))
    with open_sandbox(repo, kind="local") as sandbox:
        result = agent.run(Task(repo=str(repo), problem_statement="p"), sandbox)
        assert open(f"{sandbox.workdir}/f.txt").read() == "base\n"  # nothing applied
    outputs = [m["content"] for m in agent.store.load(result.trajectory_id).messages if m["role"] == "tool"]
    assert "max_steps, 1 step," in outputs[0] and "+one" in outputs[0]
    assert "Not run: the steps left for subagents" in outputs[1]
    assert "No finished subagent is called 'sub-9' (sub-1)" in outputs[2]
    assert [e.kind for e in seen].count("subagent_started") == 1


class _NoCopy:
    """A sandbox that cannot be copied (no `fresh`), like a remote one."""

    def __init__(self, sandbox):
        self._sandbox = sandbox

    def __getattr__(self, name):
        if name == "fresh":
            raise AttributeError(name)
        return getattr(self._sandbox, name)


def test_a_subagent_that_cannot_start_is_its_outcome_not_the_parents_crash(make_repo, tmp_path):
    repo = make_repo({"f.txt": "base\n"})
    model = Routed([reply(call("subagent", task="one"), call("subagent", task="two")), reply(call("submit"))], {})
    seen = []
    agent = Agent(model, Config(agent={"localize": False, "subagents": True}), events=EventBus(seen.append),
                  store=TrajectoryStore(tmp_path / "trajectories"))
    with open_sandbox(repo, kind="local") as sandbox:
        result = agent.run(Task(repo=str(repo), problem_statement="p"), _NoCopy(sandbox))
    outputs = [m["content"] for m in agent.store.load(result.trajectory_id).messages if m["role"] == "tool"]
    assert result.exit_status == "submitted"
    assert all("the subagent did not run: SandboxError: a local sandbox cannot be copied" in out for out in outputs[:2])
    assert [e.exit_status for e in seen if e.kind == "subagent_finished"] == ["error", "error"]


def test_interrupting_the_parent_interrupts_its_running_subagent(make_repo, tmp_path):
    repo = make_repo({"f.txt": "base\n"})
    holder = {}

    def interrupt_the_parent(_messages):  # the user's Ctrl-C, while the subagent's model is answering
        holder["agent"].interrupt()
        return reply(call("bash", command="echo late >> f.txt"))

    model = Routed([reply(call("subagent", task="slow")), reply(call("submit"))],
                   {"slow": [interrupt_the_parent, reply(call("bash", command="echo more >> f.txt")), answer("done")]})
    seen = []
    agent = holder["agent"] = Agent(model, Config(agent={"localize": False, "subagents": True}),
                                    events=EventBus(seen.append), store=TrajectoryStore(tmp_path / "trajectories"))
    with open_sandbox(repo) as sandbox:
        result = agent.run(Task(repo=str(repo), problem_statement="p"), sandbox)
    assert result.exit_status == "interrupted"
    finished = [e for e in seen if e.kind == "subagent_finished"]
    assert [e.exit_status for e in finished] == ["interrupted"]
    child = agent.store.load(finished[0].trajectory_id)
    assert child.exit_status == "interrupted" and len(child.steps) == 1 and "+late" not in (result.patch or "")


def test_a_deeper_limit_lets_a_subagent_start_one_and_stops_at_it(make_repo, tmp_path):
    repo = make_repo({"f.txt": "base\n"})
    model = Routed([reply(call("subagent", task="mid")), reply(call("submit"))],
                   {"mid": [reply(call("subagent", task="leaf")), answer("mid done")], "leaf": [answer("leaf done")]})
    config = Config(agent={"localize": False, "subagents": True, "subagent_max_depth": 2})
    agent = Agent(model, config, events=EventBus(), store=TrajectoryStore(tmp_path / "trajectories"))
    with open_sandbox(repo, kind="local") as sandbox:
        result = agent.run(Task(repo=str(repo), problem_statement="p"), sandbox)
    assert "subagent" in model.tools_offered["mid"] and "subagent" not in model.tools_offered["leaf"]
    runs = {run.task["problem_statement"]: run for run in agent.store.iter()}
    assert runs["mid"].parent_id == result.trajectory_id and runs["leaf"].parent_id == runs["mid"].id
    assert runs["leaf"].exit_status == "answered" and "leaf done" in runs["mid"].messages[-2]["content"]


def test_a_patch_that_no_longer_applies_is_refused_and_the_files_are_left_as_they_are(make_repo, tmp_path):
    repo = make_repo({"f.txt": "base\n"})
    model = Routed([reply(call("subagent", task="edit")), reply(call("bash", command="echo mine > f.txt")),
                    reply(call("subagent", apply="sub-1")), reply(call("submit"))],
                   {"edit": [reply(call("bash", command="echo theirs > f.txt")), answer("replaced the line")]})
    agent = Agent(model, Config(agent={"localize": False, "subagents": True}), events=EventBus(),
                  store=TrajectoryStore(tmp_path / "trajectories"))
    with open_sandbox(repo, kind="local") as sandbox:
        result = agent.run(Task(repo=str(repo), problem_statement="p"), sandbox)
    outputs = [m["content"] for m in agent.store.load(result.trajectory_id).messages if m["role"] == "tool"]
    assert "+theirs" in outputs[0] and "sub-1's patch does not apply to your files" in outputs[2]
    assert "+mine" in result.patch and "theirs" not in result.patch
