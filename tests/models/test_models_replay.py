
import pytest

from codeagent.models import (
    LiteLLMModel,
    ModelConfigError,
    ReplayExhausted,
    ReplayModel,
    Sampling,
    ScriptedModel,
    make_model,
)
from codeagent.models.types import Model, ModelResponse, ToolCall, parse_native_tool_calls
from codeagent.trajectory import TrajectoryStore
from tests.support.scripted import native_call
from tests.support.tools import TOOLS

START = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]


def recorded(tmp_path):
    store = TrajectoryStore(tmp_path)
    with store.create(id="rec", model="openai/qwen", task={"instance_id": "i1"}, tools=TOOLS, messages=START) as w:
        w.append_step(
            {"prompt_tokens": 11, "completion_tokens": 3, "cost": 0.5, "token_ids": [5, 6, 7], "logprobs": [-1.0, -0.5, -0.1], "finish_reason": "tool_calls"},
            [
                {"role": "assistant", "content": "look", "tool_calls": [native_call("c1", "bash", {"command": "ls"})]},
                {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
            ],
        )
        w.append_step(
            {"format_error": "tool call #1 is not valid JSON: ..."},
            [
                {"role": "assistant", "content": '<tool_call>{"name": "bash"'},
                {"role": "user", "content": "Your reply was malformed."},
            ],
        )
        w.append_step({}, [{"role": "assistant", "content": None, "tool_calls": [native_call("c2", "submit", {})]},
                           {"role": "tool", "tool_call_id": "c2", "content": "ok"}])
    return store


def test_replay_plays_back_turns_with_tokens(tmp_path):
    store = recorded(tmp_path)
    model = make_model(f"replay:{tmp_path / 'rec.jsonl'}")
    assert isinstance(model, ReplayModel) and isinstance(model, Model)
    first = model.complete(START, TOOLS, Sampling())
    assert first.content == "look"
    assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [("c1", "bash", {"command": "ls"})]
    assert first.token_ids == [5, 6, 7] and first.logprobs == [-1.0, -0.5, -0.1]
    assert first.usage.prompt_tokens == 11 and first.usage.cost == 0.5 and first.finish_reason == "tool_calls"
    second = model.complete(START + [{"role": "user", "content": "x"}], TOOLS, Sampling())
    assert second.tool_calls == [] and second.format_error.startswith("tool call #1 is not valid JSON")
    third = model.complete(START, TOOLS, Sampling())
    assert third.tool_calls[0].name == "submit" and third.format_error is None
    assert model.calls[1][-1] == {"role": "user", "content": "x"}
    with pytest.raises(ReplayExhausted, match="turn 4 .* only 3"):
        model.complete(START, TOOLS, Sampling())
    # By id from a store, and from an in-memory trajectory or its dict.
    assert ReplayModel(store.load("rec")).complete(START, TOOLS, Sampling()).content == "look"
    assert ReplayModel(store.load("rec").model_dump(mode="json")).turns[2].tool_calls[0].id == "c2"


def test_replay_by_store_id(tmp_path, monkeypatch):
    recorded(tmp_path)
    monkeypatch.setenv("CODEAGENT_TRAJECTORY_DIR", str(tmp_path))
    assert make_model("replay:re").complete(START, TOOLS, Sampling()).content == "look"


def test_scripted_model_accepts_dicts_text_and_callables():
    def react(messages):
        assert messages[-1]["content"] == "a.py"
        return {"role": "assistant", "content": None, "tool_calls": [native_call("s2", "submit", {})]}

    model = ScriptedModel(
        ['<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>', react, "no tags here", "<tool_call>{"],
        cost_per_turn=0.25,
    )
    first = model.complete(START, TOOLS, Sampling())
    assert first.tool_calls[0].arguments == {"command": "ls"} and first.usage.cost == 0.25
    history = START + [first.to_message(), {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "a.py"}]
    assert model.complete(history, TOOLS, Sampling()).tool_calls[0].name == "submit"
    third = model.complete(history, TOOLS, Sampling())
    assert third.content == "no tags here" and third.tool_calls == [] and third.format_error is None
    assert "unclosed <tool_call>" in model.complete(history, TOOLS, Sampling()).format_error
    assert len(model.calls) == 4 and model.calls[1][-1]["content"] == "a.py"
    with pytest.raises(ReplayExhausted):
        model.complete(history, TOOLS, Sampling())


def test_scripted_unknown_tool_is_a_format_error():
    model = ScriptedModel([{"role": "assistant", "content": "", "tool_calls": [native_call("x", "rm", {})]}])
    assert "unknown tool 'rm'; available tools: bash, submit" in model.complete(START, TOOLS, Sampling()).format_error


def test_to_message_shapes():
    call = ToolCall(id="c1", name="bash", arguments={"command": "ls"}, raw_arguments='{"command":"ls"}')
    assert ModelResponse(content="", tool_calls=[call]).to_message() == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command":"ls"}'}}],
    }
    assert ModelResponse(content="hi").to_message() == {"role": "assistant", "content": "hi"}


def test_native_arguments_must_be_an_object():
    calls, error = parse_native_tool_calls([native_call("c", "bash", ["ls"])])
    assert calls == [] and "must be a JSON object, got list" in error
    calls, error = parse_native_tool_calls([{"id": "c", "function": {"name": "bash", "arguments": ""}}])
    assert error is None and calls[0].arguments == {}


def test_make_model_dispatch():
    assert isinstance(make_model("openai/gpt-4o", api_base="http://x"), LiteLLMModel)
    assert isinstance(make_model("bedrock/anthropic.claude-v2:1"), LiteLLMModel)  # a colon, not a backend
    with pytest.raises(ModelConfigError, match="no model configured"):
        make_model("")
    with pytest.raises(ModelConfigError, match="needs something after 'replay:'"):
        make_model("replay:")
