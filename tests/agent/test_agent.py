"""The whole agent loop in a real Docker sandbox, driven by scripted and replayed models."""

from __future__ import annotations

import pytest

from codeagent.agent.loop import Agent, RunOptions
from codeagent.config import Config, load_config
from codeagent.events import EventBus
from codeagent.models import ReplayModel, ScriptedModel
from codeagent.run.examples import example_as_task, example_replay
from codeagent.sandbox import open_sandbox
from codeagent.task import Task
from codeagent.trajectory.store import TrajectoryStore
from tests.support.scripted import call

pytestmark = pytest.mark.usefixtures("no_leaks")


@pytest.fixture
def store(tmp_path):
    return TrajectoryStore(tmp_path / "trajectories")


def run_agent(model, task, store, config=None, options=None):
    events = []
    agent = Agent(model, config or Config(agent={"localize": False}), events=EventBus(events.append), store=store)
    with open_sandbox(task.repo, task.base_commit) as sandbox:
        result = agent.run(task, sandbox, options)
        after = sandbox.run(task.test_command, timeout=120) if task.test_command else None
    return result, events, after


def test_the_recorded_example_replays_to_a_resolving_patch(store):
    task = example_as_task("cart")
    result, events, tests_after = run_agent(ReplayModel(example_replay("cart")), task, store)
    assert result.exit_status == "submitted"
    assert "+            del self._lines[sku]" in result.patch
    assert ".codeagent-scratch" not in result.patch  # the reproduction script stays out of the patch
    assert tests_after.exit_code == 0 and "6 passed" in tests_after.output
    kinds = [event.kind for event in events]
    assert kinds[0] == "run_started" and kinds[-1] == "finished" and "patch_changed" in kinds
    saved = store.load(result.trajectory_id)
    assert saved.exit_status == "submitted" and saved.patch == result.patch and len(saved.steps) == 6
    assert saved.messages[0]["role"] == "system" and saved.messages[-1]["role"] == "tool"


def test_a_multi_file_fix(make_repo, store):
    repo = make_repo({
        "geo/units.py": "def to_metres(value, unit):\n    factors = {'m': 1, 'km': 1000}\n    return value * factors[unit]\n",
        "geo/route.py": "from .units import to_metres\n\n\ndef length(legs):\n    return sum(to_metres(v, u) for v, u in legs)\n",
        "geo/__init__.py": "",
        "tests/test_route.py": "from geo.route import length\n\n\ndef test_miles():\n    assert round(length([(1, 'mi'), (1, 'm')]), 3) == 1610.344\n",
    })
    task = Task(repo=str(repo), problem_statement="length() crashes on legs in miles ('mi')",
                test_command="python -m pytest -q tests")
    script = [
        call("editor", "Units first.", command="str_replace", path="geo/units.py",
             old_str="{'m': 1, 'km': 1000}", new_str="{'m': 1, 'km': 1000, 'mi': MILE}"),
        call("editor", command="insert", path="geo/units.py", insert_line=0, new_str="MILE = 1609.344\n"),
        call("editor", "Export the constant from the route module too.", command="str_replace",
             path="geo/route.py", old_str="from .units import to_metres", new_str="from .units import MILE, to_metres"),
        call("bash", command="python -m pytest -q tests"),
        call("submit"),
    ]
    result, _, tests_after = run_agent(ScriptedModel(script), task, store)
    assert result.exit_status == "submitted"
    assert "diff --git a/geo/route.py" in result.patch and "diff --git a/geo/units.py" in result.patch
    assert tests_after.exit_code == 0


@pytest.mark.parametrize("limit,value,expected_steps", [("max_steps", 3, 3), ("max_cost", 2.5, 3)])
def test_step_and_cost_limits(make_repo, store, limit, value, expected_steps):
    repo = make_repo({"a.txt": "a\n"})
    model = ScriptedModel([call("bash", command="true") for _ in range(10)], cost_per_turn=1.0)
    config = Config(limits={limit: value}, agent={"localize": False})
    result, _, _ = run_agent(model, Task(repo=str(repo), problem_statement="loop"), store, config)
    assert result.exit_status == limit and result.steps == expected_steps
    assert store.load(result.trajectory_id).exit_status == limit


def test_wall_time_limit(make_repo, store):
    repo = make_repo({"a.txt": "a\n"})
    model = ScriptedModel([call("bash", command="sleep 1.2") for _ in range(5)])
    config = Config(limits={"max_seconds": 1.0}, agent={"localize": False})
    result, _, _ = run_agent(model, Task(repo=str(repo), problem_statement="slow"), store, config)
    assert result.exit_status == "max_time" and result.steps == 1


def test_format_errors_are_explained_then_end_the_run(make_repo, store):
    repo = make_repo({"a.txt": "a\n"})
    bad_json = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "x1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"'}}]}
    model = ScriptedModel(["I think the bug is in a.txt", bad_json, {"role": "assistant", "content": ""}])
    result, _, _ = run_agent(model, Task(repo=str(repo), problem_statement="x"), store)
    assert result.exit_status == "format_errors" and result.steps == 3
    second_prompt = model.calls[1][-1]["content"]
    assert "the reply has no tool call" in second_prompt and "format error 1 of 3" in second_prompt
    third_prompt = model.calls[2][-1]["content"]
    assert "not valid JSON" in third_prompt and "line 1 column 17" in third_prompt  # the real parse error
    assert "empty reply" in store.load(result.trajectory_id).exit_message


def test_a_good_reply_resets_the_format_error_count(make_repo, store):
    repo = make_repo({"a.txt": "a\n"})
    turns = ["garbage", "more garbage", call("bash", command="true"), "garbage", "garbage", call("submit")]
    result, _, _ = run_agent(ScriptedModel(turns), Task(repo=str(repo), problem_statement="x"), store)
    assert result.exit_status == "submitted"


def test_ctrl_c_ends_the_run_as_interrupted_with_the_trajectory_saved(make_repo, store):
    repo = make_repo({"a.txt": "a\n"})

    def interrupt(_messages):
        raise KeyboardInterrupt

    turns = [call("bash", command="echo changed > a.txt"), interrupt]
    result, events, _ = run_agent(ScriptedModel(turns), Task(repo=str(repo), problem_statement="x"), store)
    assert result.exit_status == "interrupted" and events[-1].kind == "finished"
    saved = store.load(result.trajectory_id)
    assert saved.exit_status == "interrupted" and len(saved.steps) == 1 and "+changed" in saved.patch


def test_interrupting_a_running_command_leaves_the_sandbox_usable(make_repo):
    repo = make_repo({"a.txt": "a\n"})
    import _thread
    import threading

    with open_sandbox(repo) as sandbox:
        sandbox.run("export KEEP=yes")
        timer = threading.Timer(0.5, _thread.interrupt_main)
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            sandbox.run("sleep 30")
        assert sandbox.run("echo $KEEP; ps -eo args | grep -c '^sleep 30'").output.split() == ["yes", "0"]


def test_long_observations_are_elided_to_fit_the_context(make_repo, store):
    repo = make_repo({"a.txt": "a\n"})
    turns = [call("bash", command="seq 1 20000") for _ in range(4)] + [call("submit")]
    model = ScriptedModel(turns)
    config = Config(model={"context_tokens": 9000, "max_tokens": 1000}, agent={"localize": False})
    result, _, _ = run_agent(model, Task(repo=str(repo), problem_statement="x"), store, config)
    assert result.exit_status == "submitted"
    last_prompt = model.calls[-1]
    assert sum(len(str(m.get("content") or "")) for m in last_prompt) < 9000 * 4
    assert any("elided to fit the context window" in str(m.get("content")) for m in last_prompt)


def test_config_layers_and_unknown_keys(tmp_path, monkeypatch):
    from codeagent.config import ConfigError

    user = tmp_path / "user.yaml"
    user.write_text("model: {name: user-model, temperature: 0.5}\nlimits: {max_steps: 7}\n")
    monkeypatch.setenv("CODEAGENT_CONFIG", str(user))
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".codeagent.yaml").write_text("model: {name: project-model}\n")
    config = load_config(repo, overrides={"limits": {"max_steps": 9}}, trust=True)
    assert (config.model.name, config.model.temperature, config.limits.max_steps) == ("project-model", 0.5, 9)
    (repo / ".codeagent.yaml").write_text("model: {nmae: typo}\n")
    with pytest.raises(ConfigError, match=r"\.codeagent\.yaml: model\.nmae: Extra inputs are not permitted"):
        load_config(repo)


def test_approver_denials_go_back_to_the_model(make_repo, store):
    from codeagent.agent.loop import Approval

    repo = make_repo({"a.txt": "a\n"})
    asked = []

    def approver(tool_call):
        asked.append(tool_call.name)
        if tool_call.name == "bash":
            return Approval(False, "do not delete files")
        return Approval(True)

    model = ScriptedModel([call("bash", command="rm a.txt"), call("submit")])
    agent = Agent(model, Config(agent={"localize": False}), store=store, approver=approver)
    with open_sandbox(repo) as sandbox:
        result = agent.run(Task(repo=str(repo), problem_statement="x"), sandbox)
        assert sandbox.read_file("a.txt") == b"a\n"
    assert asked == ["bash", "submit"] and result.exit_status == "submitted"
    denial = model.calls[1][-1]["content"]
    assert "did not allow" in denial and "do not delete files" in denial


def test_interrupt_from_another_thread_stops_the_command_and_the_run(make_repo, store):
    import threading

    repo = make_repo({"a.txt": "a\n"})
    agent = Agent(ScriptedModel([call("bash", command="sleep 60"), call("submit")]),
                  Config(agent={"localize": False}), store=store)
    with open_sandbox(repo) as sandbox:
        threading.Timer(1.0, agent.interrupt).start()
        result = agent.run(Task(repo=str(repo), problem_statement="x"), sandbox)
        assert sandbox.run("echo alive").output == "alive\n"
    assert result.exit_status == "interrupted" and result.seconds < 20
    assert store.load(result.trajectory_id).exit_status == "interrupted"


def test_resume_continues_the_same_trajectory_with_a_follow_up(make_repo, store):
    repo = make_repo({"a.txt": "a\n"})
    task = Task(repo=str(repo), problem_statement="change a.txt")
    first = Agent(ScriptedModel([call("bash", command="echo b > a.txt")]),
                  Config(limits={"max_steps": 1}, agent={"localize": False}), store=store)
    with open_sandbox(repo) as sandbox:
        done = first.run(task, sandbox)
    assert done.exit_status == "max_steps"
    saved = store.load(done.trajectory_id)
    model = ScriptedModel([call("bash", command="cat a.txt"), call("submit")])
    second = Agent(model, Config(agent={"localize": False}), store=store)
    with open_sandbox(repo) as sandbox:  # a new sandbox, with the session's patch applied
        sandbox.write_file("/tmp/session.patch", saved.patch)
        assert sandbox.run("git apply /tmp/session.patch").exit_code == 0
        result = second.run(task, sandbox, RunOptions(resume=saved, follow_up="Now also check the file."))
    assert result.trajectory_id == done.trajectory_id and result.exit_status == "submitted"
    assert model.calls[0][-1] == {"role": "user", "content": "Now also check the file."}
    assert model.calls[1][-1]["content"].strip() == "b"
    final = store.load(done.trajectory_id)
    assert len(final.steps) == 3 and final.exit_status == "submitted" and "+b" in final.patch
