import json

import pytest

from codeagent.agent.history import elision_marker, estimate_tokens, fit_messages, head_tail


def conversation(turns=6, output_chars=4000, calls_per_turn=1):
    messages = [
        {"role": "system", "content": "You are a coding agent. " * 10},
        {"role": "user", "content": "Fix the bug in parser.py " * 10},
    ]
    for turn in range(turns):
        ids = [f"t{turn}c{k}" for k in range(calls_per_turn)]
        messages.append({
            "role": "assistant",
            "content": f"turn {turn}",
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"cat f{turn}"})}}
                for i in ids
            ],
        })
        for i in ids:
            messages.append({"role": "tool", "tool_call_id": i, "content": f"<{i}>" + "x" * output_chars})
    return messages


def assert_pairing(messages):
    """Every tool message answers a call of the nearest assistant before it, and every call is answered."""
    pending = set()
    for message in messages:
        if message["role"] == "assistant":
            assert not pending, f"unanswered tool calls {pending}"
            pending = {c["id"] for c in message.get("tool_calls") or []}
        elif message["role"] == "tool":
            assert message["tool_call_id"] in pending, f"orphan tool message {message['tool_call_id']}"
            pending.discard(message["tool_call_id"])
        else:
            assert not pending, f"unanswered tool calls {pending}"
    assert not pending


def test_fits_untouched_when_under_budget():
    messages = conversation(turns=2, output_chars=100)
    fitted = fit_messages(messages, 10_000)
    assert fitted == messages and fitted is not messages


def test_elides_oldest_observations_first():
    messages = conversation(turns=6, output_chars=4000)  # ~1000 tokens per observation
    budget = estimate_tokens(messages) - 2500  # needs about three elisions
    fitted = fit_messages(messages, budget)
    assert estimate_tokens(fitted) <= budget
    assert len(fitted) == len(messages)
    tools = [m for m in fitted if m["role"] == "tool"]
    elided = [m["content"].startswith("[output elided") for m in tools]
    assert elided == [True, True, True, False, False, False]
    assert tools[0]["content"] == elision_marker(len(messages[3]["content"]))
    assert fitted[:2] == messages[:2] and fitted[-2:] == messages[-2:]
    assert messages[3]["content"].startswith("<t0c0>")  # the input is not modified
    assert_pairing(fitted)


def test_drops_old_turns_whole_when_eliding_is_not_enough():
    messages = conversation(turns=8, output_chars=400, calls_per_turn=3)
    for message in messages:
        if message["role"] == "assistant":
            message["content"] = "long reasoning " * 200  # too big to survive on elision alone
    budget = estimate_tokens(messages) // 3
    fitted = fit_messages(messages, budget)
    assert estimate_tokens(fitted) <= budget
    assert fitted[:2] == messages[:2]
    assert "earlier messages were removed" in fitted[2]["content"]
    assert fitted[-4:] == messages[-4:]  # the latest turn is intact
    assert_pairing(fitted)


def test_never_crashes_and_cuts_the_last_observation_head_and_tail():
    messages = conversation(turns=3, output_chars=40_000)
    budget = 800
    fitted = fit_messages(messages, budget)
    assert estimate_tokens(fitted) <= budget
    last = fitted[-1]
    assert last["role"] == "tool" and last["content"].startswith("<t2c0>") and last["content"].endswith("x")
    assert "chars elided to fit the context window" in last["content"]
    assert_pairing(fitted)


@pytest.mark.parametrize("budget", [0, 1, 50])
def test_impossible_budgets_still_return_a_well_formed_conversation(budget):
    fitted = fit_messages(conversation(turns=4, output_chars=5000), budget)
    assert fitted[0]["role"] == "system" and fitted[1]["role"] == "user"
    assert_pairing(fitted)


def test_custom_token_counter_is_used():
    calls = []

    def count(messages):
        calls.append(len(messages))
        return sum(len(str(m.get("content"))) for m in messages)  # one token per char

    messages = conversation(turns=4, output_chars=1000)
    budget = sum(len(str(m.get("content"))) for m in messages) - 1500
    fitted = fit_messages(messages, budget, count)
    assert calls and sum(len(str(m.get("content"))) for m in fitted) <= budget
    assert [m["content"].startswith("[output elided") for m in fitted if m["role"] == "tool"] == [True, True, False, False]


def test_head_tail():
    text = "A" * 50 + "B" * 50
    cut = head_tail(text, 20)
    assert cut.startswith("A" * 10) and cut.endswith("B" * 10) and "80 chars elided" in cut
    assert head_tail("short", 20) == "short"
    assert head_tail("short", 0) == "short"  # the note would be longer than the text
