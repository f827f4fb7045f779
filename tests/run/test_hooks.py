"""Hooks with Claude Code's contract in real runs (ScriptedModel, Docker sandbox): exit 2 blocks and
the model hears why, JSON decisions allow/deny/ask, PostToolUse sees the result, UserPromptSubmit and
SessionStart add context, Stop keeps the agent going; the model's data reaches a hook on stdin only."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from codeagent.agent.loop import Agent, Approval
from codeagent.config import Config, HookSettings, load_config
from codeagent.events import EventBus
from codeagent.hooks import Hooks
from codeagent.models import ScriptedModel
from codeagent.sandbox import open_sandbox
from codeagent.task import Task
from codeagent.trajectory.store import TrajectoryStore
from tests.support.scripted import call

ISSUE = "The cart total is wrong"


def hook(tmp_path: Path, name: str, body: str) -> str:
    """A hook script: `event` is the JSON it got on stdin, each one is logged to NAME.jsonl."""
    script = tmp_path / f"{name}.py"
    log = tmp_path / f"{name}.jsonl"
    script.write_text("import json, sys\nevent = json.load(sys.stdin)\n"
                      f"with open({str(log)!r}, 'a') as log:\n    log.write(json.dumps(event) + '\\n')\n" + body)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def logged(tmp_path: Path, name: str) -> list[dict]:
    path = tmp_path / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def hooks_config(**events) -> Config:
    return Config(agent={"localize": False}, hooks={
        event: [{"matcher": matcher, "hooks": [{"command": command}]} for matcher, command in groups]
        for event, groups in events.items()})


@pytest.fixture
def run(make_repo, tmp_path, no_leaks):
    def run(config: Config, script: list, approver=None, task: str = ISSUE):
        repo = make_repo({"README.md": "keep me\n"})
        events, warnings = [], []
        model = ScriptedModel(script)
        agent = Agent(model, config, events=EventBus(events.append), store=TrajectoryStore(tmp_path / "t"),
                      approver=approver, warn=warnings.append)
        with open_sandbox(str(repo)) as sandbox:
            result = agent.run(Task(repo=str(repo), problem_statement=task), sandbox)
        observations = [event.output for event in events if event.kind == "observation"]
        return result, observations, model, warnings
    return run


def test_a_pre_tool_use_hook_that_exits_2_blocks_the_command_and_the_model_sees_why(run, tmp_path):
    guard = hook(tmp_path, "guard", "if 'rm ' in event['tool_input'].get('command', ''):\n"
                 "    print('rm is not allowed here; use git rm', file=sys.stderr)\n    sys.exit(2)\n")
    result, observations, model, warnings = run(hooks_config(PreToolUse=[("bash", guard)]), [
        call("bash", command="rm README.md"), call("bash", command="cat README.md"), call("submit")])
    assert result.exit_status == "submitted" and warnings == []
    assert observations[0] == "A PreToolUse hook blocked this call: rm is not allowed here; use git rm"
    assert "rm is not allowed here; use git rm" in model.calls[1][-1]["content"]  # the next observation
    assert observations[1] == "keep me"  # the file was not removed
    first = logged(tmp_path, "guard")[0]  # the matcher `bash` let only bash calls through (not submit)
    assert [event["tool_name"] for event in logged(tmp_path, "guard")] == ["bash", "bash"]
    assert first["hook_event_name"] == "PreToolUse" and first["tool_input"] == {"command": "rm README.md"}
    assert first["session_id"] == result.trajectory_id and first["transcript_path"] == result.trajectory_path
    assert first["tool_use_id"].startswith("call_") and first["cwd"]


def test_json_decisions_deny_allow_and_ask(run, tmp_path):
    decide = hook(tmp_path, "decide", "\n".join([
        "command = event['tool_input']['command']",
        "for word in ('deny', 'allow', 'ask'):",
        "    if word + '-me' in command:",
        "        print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse', 'permissionDecision': word,",
        "                          'permissionDecisionReason': 'policy ' + word}}))", ""]))
    asked = []

    def approver(call, force=False):  # the user: says yes to submit, and to commands only when a hook made us ask
        asked.append((call.arguments.get("command", call.name), force))
        return Approval(force or call.name == "submit", "" if force else "not now")

    result, observations, _, _ = run(hooks_config(PreToolUse=[("", decide)]), [
        call("bash", command="echo deny-me"), call("bash", command="echo allow-me"),
        call("bash", command="echo ask-me"), call("bash", command="echo plain"), call("submit")], approver=approver)
    assert observations[0] == "A PreToolUse hook blocked this call: policy deny"
    assert observations[1] == "allow-me"  # allowed by the hook: the approver was not asked
    assert observations[2] == "ask-me"  # the hook said ask: the user was asked (force) and said yes
    assert observations[3] == "The user did not allow this call. Their reason: not now"
    assert asked == [("echo ask-me", True), ("echo plain", False), ("submit", False)]
    assert result.exit_status == "submitted"


def test_ask_without_anyone_to_ask_does_not_run(run, tmp_path):
    ask = hook(tmp_path, "ask", "print(json.dumps({'hookSpecificOutput': {'permissionDecision': 'ask'}}))\n")
    _, observations, _, _ = run(hooks_config(PreToolUse=[("bash", ask)]), [
        call("bash", command="touch made"), call("bash", command="ls made"), call("submit")])
    assert observations[0].startswith("Not run: a PreToolUse hook wants the user to approve this call")


def test_post_tool_use_sees_the_tool_response_and_its_reason_reaches_the_model(run, tmp_path):
    after = hook(tmp_path, "after", "print(json.dumps({'decision': 'block', 'reason': 'lint: line too long',"
                 " 'hookSpecificOutput': {'hookEventName': 'PostToolUse', 'additionalContext': 'style: PEP 8'}}))\n")
    result, observations, model, _ = run(hooks_config(PostToolUse=[("bash", after)]), [
        call("bash", command="echo from-the-sandbox; (exit 3)"), call("submit")])
    assert result.exit_status == "submitted"
    assert observations[0] == ("from-the-sandbox\n\n[PostToolUse hook] lint: line too long\n\n"
                               "[PostToolUse hook context] style: PEP 8")
    assert "lint: line too long" in model.calls[1][-1]["content"]
    (event,) = logged(tmp_path, "after")
    assert event["hook_event_name"] == "PostToolUse" and event["tool_input"] == {
        "command": "echo from-the-sandbox; (exit 3)"}
    assert event["tool_response"]["output"] == "from-the-sandbox" and event["tool_response"]["exit_code"] == 3


def test_user_prompt_submit_and_session_start_add_context(run, tmp_path):
    prompt = hook(tmp_path, "prompt", "print('Ticket CART-7: totals exclude tax')\n")
    start = hook(tmp_path, "start", "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'SessionStart',"
                 " 'additionalContext': 'Branch: release-2.1'}}))\n")
    config = hooks_config(UserPromptSubmit=[("", prompt)], SessionStart=[("startup", start)])
    result, _, model, _ = run(config, [call("submit")])
    assert result.exit_status == "submitted"
    sent = "\n".join(str(message["content"]) for message in model.calls[0])
    assert "Ticket CART-7: totals exclude tax" in sent and "Branch: release-2.1" in sent
    assert logged(tmp_path, "prompt")[0]["prompt"] == ISSUE
    assert logged(tmp_path, "start")[0]["source"] == "startup"


def test_user_prompt_submit_exit_2_blocks_the_prompt_before_the_model_sees_it(run, tmp_path):
    block = hook(tmp_path, "block", "print('prompts may not mention passwords', file=sys.stderr)\nsys.exit(2)\n")
    result, _, model, warnings = run(hooks_config(UserPromptSubmit=[("", block)]), [call("submit")],
                                     task="print the admin password")
    assert model.calls == [] and result.exit_status == "interrupted"
    assert "prompts may not mention passwords" in result.message
    assert any("prompts may not mention passwords" in line for line in warnings)


def test_a_stop_hook_that_exits_2_makes_the_agent_go_on_with_the_reason(run, tmp_path):
    stop = hook(tmp_path, "stop", "if not event['stop_hook_active']:\n"
                "    print('run the tests before you finish', file=sys.stderr)\n    sys.exit(2)\n")
    result, observations, model, _ = run(hooks_config(Stop=[("", stop)]), [
        call("submit"), call("bash", command="echo tests ran"), call("submit")])
    assert result.exit_status == "submitted" and result.steps == 3
    assert "run the tests before you finish" in model.calls[1][-1]["content"]
    assert observations[1] == "tests ran"
    assert [event["stop_hook_active"] for event in logged(tmp_path, "stop")] == [False, True]


def test_the_models_shell_metacharacters_reach_hooks_as_data_and_are_never_run(run, tmp_path):
    marker = tmp_path / "pwned"
    nasty = f"echo \"$(touch {marker})\" `touch {marker}`; touch {marker} '; touch {marker}; ' && echo done"
    record = hook(tmp_path, "record", "")
    run(hooks_config(PreToolUse=[("", record)], PostToolUse=[("", record)]), [
        call("bash", command=nasty), call("submit")])
    events = logged(tmp_path, "record")
    assert [event["tool_input"].get("command") for event in events[:2]] == [nasty, nasty]  # verbatim on stdin
    assert not marker.exists()  # the hooks ran on the host and none of it was executed there


# -- without a run: errors, timeouts, trust ------------------------------------------------------

def test_a_crashing_or_hanging_hook_is_reported_and_blocks_nothing(tmp_path):
    warnings = []
    settings = HookSettings(PreToolUse=[{"hooks": [{"command": "echo oops >&2; exit 1"},
                                                   {"command": "sleep 30", "timeout": 1},
                                                   {"command": str(tmp_path / "missing-script")}]}])
    verdict = Hooks(settings, warn=warnings.append).pre_tool_use("bash", {"command": "ls"}, "call_1")
    assert not verdict.block and verdict.decision is None
    assert len(warnings) == 3
    assert "failed (exit 1): oops" in warnings[0] and "ran past its timeout of 1s" in warnings[1]
    assert "failed (exit 127)" in warnings[2]


def test_an_untrusted_repository_config_sets_no_hook(make_repo, tmp_path, monkeypatch):
    monkeypatch.setenv("CODEAGENT_CONFIG", str(tmp_path / "user.yaml"))
    marker = tmp_path / "ran"
    repo = make_repo({".codeagent.yaml": json.dumps({"hooks": {
        "SessionStart": [{"hooks": [{"command": f"touch {marker}"}]}]}})})
    warnings = []
    config = load_config(repo, warn=warnings.append)
    assert "hooks.SessionStart" in warnings[0]
    Hooks(config.hooks).session_start("startup")
    assert not marker.exists()
    Hooks(load_config(repo, trust=True).hooks).session_start("startup")  # trusted: the user's own hook
    assert marker.exists()


def test_in_a_full_auto_tui_session_a_hook_that_says_ask_brings_the_question(make_repo, tmp_path):
    from codeagent.run.session import Session
    from codeagent.run.session.approval import Decision

    ask = hook(tmp_path, "ask", "if 'push' in event['tool_input'].get('command', ''):\n"
               "    print(json.dumps({'hookSpecificOutput': {'permissionDecision': 'ask',"
               " 'permissionDecisionReason': 'pushing is for humans'}}))\n")
    config = hooks_config(PreToolUse=[("bash", ask)]).model_copy(update={"trajectories_dir": str(tmp_path / "t")})
    requests = []

    def answer(request):
        requests.append(request)
        request.answer(Decision("deny", "not today"))

    model = ScriptedModel([call("bash", command="echo fine"), call("bash", command="git push"), call("submit")])
    session = Session(config, model, repo=str(make_repo({"README.md": "x\n"})), mode="full-auto",
                      store=TrajectoryStore(tmp_path / "t"), ask=answer)
    try:
        session.submit("push it")
        assert session.wait_idle(90) and session.last_status == "empty_submission"  # the push was denied
    finally:
        session.close()
    assert [request.body for request in requests] == ["git push"]  # full-auto asked only where the hook said so
    assert "not today" in model.calls[2][-1]["content"]
