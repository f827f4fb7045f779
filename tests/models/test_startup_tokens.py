"""The first request of a run does not load litellm's tokenizer (issue 27): a conversation whose upper bound of
tokens (its bytes, plus a chat format's own tokens) is under the budget is sent whole, uncounted, as counting
would have sent it; over the bound, or with more than text, it is counted as before."""

from __future__ import annotations

import random

import pytest

from codeagent.agent.history import fit_messages
from codeagent.models import LiteLLMModel
from codeagent.models.tokens import estimate_tokens, token_upper_bound

ALPHABETS = ["abc xyz\n", "def f(x):\n    return x + 1\n", "日本語のテキスト", "🙂🚀✨", "ü é ß ø", "\t\x00\x7f{}[]<|>"]


def _conversation(rng: random.Random) -> list[dict]:
    def text() -> str:
        alphabet = rng.choice(ALPHABETS)
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 400)))

    messages = [{"role": "system", "content": text()}, {"role": "user", "content": text()}]
    if rng.random() < 0.5:
        messages.append({"role": "user", "content": text(), "name": "someone"})
    return messages


def _never(messages: list[dict]) -> int:
    raise AssertionError("counted")


@pytest.mark.parametrize("model", ["openai/bench", "gpt-4o", "gpt-3.5-turbo"])
def test_the_bound_is_above_litellms_count(model):
    pytest.importorskip("litellm")
    counter = LiteLLMModel(model, api_base="http://127.0.0.1:9/v1")
    rng = random.Random(27)
    for _ in range(60):
        messages = _conversation(rng)
        bound = counter.token_upper_bound(messages)
        assert bound is not None
        assert bound >= counter.count_tokens(messages)
        assert bound >= estimate_tokens(messages)
        for message in messages:
            assert token_upper_bound([message]) >= counter.count_tokens([message])


def test_more_than_text_is_counted():
    assert token_upper_bound([{"role": "user", "content": [{"type": "text", "text": "hi"}]}]) is None
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    assert token_upper_bound([{"role": "assistant", "content": None, "tool_calls": [call]}]) is None


def test_under_the_bound_nothing_is_counted_and_the_messages_go_whole():
    messages = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix it."}]
    fitted = fit_messages(messages, 10_000, _never, upper_bound=token_upper_bound)
    assert fitted == messages and fitted[0] is not messages[0]  # copies, as counting gives


@pytest.mark.parametrize("seed", range(8))
def test_over_the_bound_the_result_is_the_counted_one(seed):
    rng = random.Random(seed)
    messages = _conversation(rng) + [{"role": "assistant", "content": "x" * 300}, {"role": "user", "content": "y" * 300}]
    for budget in (50, 200, 400, 5_000):
        counted = fit_messages(messages, budget, estimate_tokens)
        assert fit_messages(messages, budget, estimate_tokens, upper_bound=token_upper_bound) == counted
        assert fit_messages(messages, budget, estimate_tokens, upper_bound=lambda _: None) == counted
