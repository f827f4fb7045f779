"""`codeagent serve` on the batched engine, and served runs through codeagent's own client: concurrent
requests decoded as one batch with the ids a lone request gets, token ids and logprobs in the response,
and the tool schemas reaching the chat template as the agent wrote them (the real server on 127.0.0.1,
the tiny offline model, litellm as the client)."""

from __future__ import annotations

import copy
import json
import threading
import urllib.request

import pytest

from tests.support.tools import BASH, SUBMIT, closed

TOOLS = [closed(BASH), closed(SUBMIT)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    import torch

    from codeagent.train.tiny import build_tiny

    torch.set_num_threads(1)
    return build_tiny(tmp_path_factory.mktemp("tiny-serve-tokens"), vocab_size=512)


@pytest.fixture(scope="module")
def local(tiny):
    from codeagent.models.hf import HFModel

    return HFModel.load(str(tiny), max_new_tokens=6)


@pytest.fixture(scope="module")
def served(tiny):
    from codeagent.serve.server import Server, load_served_model

    with Server(load_served_model(str(tiny), max_new_tokens=6), name="tiny", port=0) as server:
        yield server


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as reply:
        return json.loads(reply.read())


def conversation(index: int) -> list[dict]:
    return [{"role": "system", "content": "You fix bugs."},
            {"role": "user", "content": "Fix the bug in module" + "s" * index + f" number {index}."}]


def test_concurrent_requests_are_batched_and_token_exact(served, local):
    from tests.support.engine import gated

    engine = served.service.model.generator
    entered, gate = gated(engine)
    replies: dict[int, dict] = {}

    def ask(index):
        replies[index] = post(served.url, {"messages": conversation(index), "tools": TOOLS, "max_tokens": 2 + index,
                                           "logprobs": True, "return_token_ids": True})

    threads = [threading.Thread(target=ask, args=(0,))]
    threads[0].start()
    entered.wait()  # the first request is decoding; the next four arrive meanwhile
    threads += [threading.Thread(target=ask, args=(i,)) for i in range(1, 5)]
    for thread in threads[1:]:
        thread.start()
    while engine._queue.qsize() < 4:
        threading.Event().wait(0.01)
    gate.set()
    for thread in threads:
        thread.join()
    assert engine.batch_sizes[-2:] == [1, 4]
    for index, reply in replies.items():
        prompt = local.prompt_ids(conversation(index), TOOLS)
        alone = local.generator.generate(prompt, max_new_tokens=2 + index, temperature=0.0, top_p=None, seed=None,
                                         stop_ids=local.stop_ids)
        choice = reply["choices"][0]
        assert reply["prompt_token_ids"] == prompt  # the schemas as sent, additionalProperties included
        assert choice["token_ids"] == alone[0]
        assert [entry["logprob"] for entry in choice["logprobs"]["content"]] == pytest.approx(alone[1], abs=1e-5)


def test_a_served_run_through_litellm_is_token_exact_with_the_tool_schemas_unchanged(served, local):
    from codeagent.models import Sampling
    from codeagent.models.litellm_model import LiteLLMModel
    from codeagent.train.sequences import chain_steps

    client = LiteLLMModel("hosted_vllm/tiny", api_base=served.url, retries=0)
    tools = copy.deepcopy(TOOLS)
    messages = conversation(1)
    first = client.complete(messages, tools, Sampling(max_tokens=5))
    assert tools == TOOLS  # the client's schemas are not edited by litellm
    # what the served model was fed is exactly what the local backend (the trained prompt) renders
    assert first.prompt_token_ids == local.prompt_ids(messages, TOOLS)
    assert first.token_ids and len(first.token_ids) == len(first.logprobs) == first.usage.completion_tokens
    messages = messages + [first.to_message(), {"role": "user", "content": "Use the tools."}]
    second = client.complete(messages, tools, Sampling(max_tokens=5))
    # the second prompt continues the first turn as generated (not a re-rendering of its text)
    assert second.prompt_token_ids[: len(first.prompt_token_ids) + len(first.token_ids)] == (
        first.prompt_token_ids + first.token_ids)
    steps = [{"prompt_token_ids": r.prompt_token_ids, "token_ids": r.token_ids, "logprobs": r.logprobs}
             for r in (first, second)]
    sequence = chain_steps(steps)
    assert sequence.prompt_ids == first.prompt_token_ids
    assert sum(sequence.mask) == len(first.token_ids) + len(second.token_ids)


def test_a_served_run_named_openai_records_the_token_ids_too(served, local):
    """What most users type for an OpenAI-compatible server: the server's model list says it gives ids."""
    from codeagent.models import Sampling
    from codeagent.models.litellm_model import LiteLLMModel

    client = LiteLLMModel("openai/tiny", api_base=served.url, retries=0)
    messages = conversation(2)
    reply = client.complete(messages, copy.deepcopy(TOOLS), Sampling(max_tokens=5))
    assert reply.prompt_token_ids == local.prompt_ids(messages, TOOLS)
    assert reply.token_ids and len(reply.token_ids) == len(reply.logprobs) == reply.usage.completion_tokens
