"""The local transformers backend: the Model protocol, token-exact prompts across turns, errors.

A tiny random model and a byte-level BPE tokenizer are built offline in a fixture (no hub access).
"""

from __future__ import annotations

import json

import pytest

from codeagent.models import ModelConfigError, Sampling, make_model
from tests.support.tools import TOOLS


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from codeagent.train.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("tiny-hf"), vocab_size=512)


@pytest.fixture(scope="module")
def model(tiny_dir):
    import torch

    torch.set_num_threads(1)
    return make_model(f"hf:{tiny_dir}")


def conversation():
    return [{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": "Fix the bug in a.py"}]


def test_complete_returns_exact_ids_and_logprobs(model):
    response = model.complete(conversation(), TOOLS, Sampling(temperature=1.0, max_tokens=20, seed=3))
    assert response.prompt_token_ids and response.token_ids
    assert len(response.logprobs) == len(response.token_ids) == response.usage.completion_tokens
    assert all(lp <= 0.0 for lp in response.logprobs)
    assert response.finish_reason in ("stop", "length")
    # The prompt is the chat template's rendering, tools included.
    rendered = model.tokenizer.decode(response.prompt_token_ids)
    assert rendered.startswith("<|im_start|>system\nYou fix bugs.") and '"name": "bash"' in rendered
    assert rendered.endswith("<|im_start|>assistant\n")


def test_seeded_sampling_is_reproducible(model):
    a = model.complete(conversation(), TOOLS, Sampling(temperature=1.0, max_tokens=12, seed=7))
    b = model.complete(conversation(), TOOLS, Sampling(temperature=1.0, max_tokens=12, seed=7))
    assert a.token_ids == b.token_ids


def test_next_turn_prompt_extends_the_generated_ids(model):
    """Multi-turn token exactness: turn 2's prompt = turn 1's prompt + the ids sampled in turn 1 (not a
    re-tokenization of the decoded text) + the observation's tokens."""
    messages = conversation()
    first = model.complete(messages, TOOLS, Sampling(temperature=1.0, max_tokens=16, seed=1))
    messages = messages + [first.to_message(), {"role": "user", "content": "Try again."}]
    second = model.complete(messages, TOOLS, Sampling(temperature=1.0, max_tokens=16, seed=2))
    so_far = first.prompt_token_ids + first.token_ids
    assert second.prompt_token_ids[: len(so_far)] == so_far
    added = model.tokenizer.decode(second.prompt_token_ids[len(so_far):])
    assert "Try again." in added and added.endswith("<|im_start|>assistant\n")
    if first.finish_reason == "length":  # an unfinished reply is closed by a token the model did not write
        assert added.startswith("<|im_end|>")


def test_a_rewritten_history_is_rendered_afresh(model):
    messages = conversation()
    first = model.complete(messages, TOOLS, Sampling(temperature=1.0, max_tokens=8, seed=1))
    edited = dict(first.to_message(), content="something else entirely")
    messages = messages + [edited, {"role": "user", "content": "next"}]
    second = model.complete(messages, TOOLS, Sampling(max_tokens=4))
    assert model.tokenizer.decode(second.prompt_token_ids).count("something else entirely") == 1


def test_tool_calls_are_parsed_from_the_reply(tiny_dir):
    """A model that writes a <tool_call> block yields a structured call (scripted generator, real parsing)."""
    from codeagent.models.hf import HFModel

    class Scripted:
        def __init__(self, tokenizer):
            self.ids = tokenizer('<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>',
                                 add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]

        def generate(self, prompt_ids, **_):
            return list(self.ids), [-0.1] * len(self.ids), True

    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    model = HFModel(AutoModelForCausalLM.from_pretrained(tiny_dir), tokenizer, generator=Scripted(tokenizer))
    response = model.complete(conversation(), TOOLS, Sampling())
    assert response.format_error is None
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("bash", {"command": "ls"})]
    assert response.token_ids[-1] == tokenizer.eos_token_id and response.finish_reason == "stop"


def test_missing_model_path_is_a_clear_error(tmp_path):
    with pytest.raises(ModelConfigError, match="does not exist"):
        make_model(f"hf:{tmp_path / 'nope'}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelConfigError, match="no config.json"):
        make_model(f"hf:{tmp_path / 'empty'}")


def test_adapter_directory_names_its_base(tmp_path, tiny_dir):
    from codeagent.models.hf import resolve_base

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(tiny_dir)}))
    assert resolve_base(str(adapter)) == (str(tiny_dir), str(adapter))
    assert resolve_base(str(tiny_dir)) == (str(tiny_dir), None)
