"""A run's first request to a self-hosted server, sent before litellm is imported (models/first_request.py):
the same request on the wire and the same response as through litellm, litellm taking over on a failure."""

import json
import subprocess
import sys

import pytest

from codeagent.models import LiteLLMModel, Sampling, progress
from tests.support.fake_server import MESSAGES, Streamed, chunks, completion, tool_call
from tests.support.tools import TOOLS

SAMPLING = Sampling(temperature=0.3, max_tokens=256, seed=7, stop=["STOP"])
SERVED_LOGPROBS = {"content": [{"token": "token_id:17", "logprob": -0.5, "bytes": None, "top_logprobs": []},
                               {"token": "token_id:4", "logprob": -0.25, "bytes": None, "top_logprobs": []}]}


def served_reply():
    body = completion({"content": "ok", "tool_calls": [tool_call('{"command": "ls"}')]}, "tool_calls",
                      logprobs=SERVED_LOGPROBS)
    body["choices"][0]["token_ids"] = [17, 4]  # vLLM's return_token_ids
    return 200, {**body, "prompt_token_ids": [1, 2, 3]}


def streamed_reply():
    return Streamed(chunks(["I will ", "look."], [("bash", ['{"comm', 'and": "ls"}'])], "tool_calls"))


def call(server, name, light, messages=MESSAGES):
    model = LiteLLMModel(name, api_base=server.base, retries=2, backoff_base=0.01)
    if light:
        model.start_light()
    assert (model._light is not None) == light
    heard: list = []
    with progress.listening(heard.append):
        response = model.complete(messages, TOOLS, SAMPLING)
    deltas = [notice for notice in heard if isinstance(notice, (progress.TextDelta, progress.ToolCallDelta))]
    return response, deltas


def sent(request) -> tuple:
    return request["body"], request["path"], request["headers"].get("authorization")


@pytest.mark.parametrize("name, reply", [("openai/test-model", streamed_reply),
                                         ("hosted_vllm/Qwen/Qwen3-8B", served_reply)])
def test_the_light_request_and_its_response_are_litellms_own(server, name, reply):
    """Streamed (openai/ at an api_base) and served (hosted_vllm/: token ids, no stream): the server gets
    the same body, path and key, and the run the same response, reported deltas included."""
    responses = []
    for light in (False, True):
        server.replies.append(reply())
        responses.append(call(server, name, light))
    (plain, plain_deltas), (light, light_deltas) = responses
    assert sent(server.requests[0]) == sent(server.requests[1])
    assert light.model_dump(exclude={"raw"}) == plain.model_dump(exclude={"raw"})
    assert light.raw["model"] == plain.raw["model"]  # what a run reads of the raw reply (the served model's name)
    assert light_deltas == plain_deltas
    assert light.tool_calls and (light.prompt_token_ids == [1, 2, 3] if "vllm" in name else light_deltas)


def test_a_failed_light_request_is_sent_again_by_litellm(server):
    server.replies += [(503, {"error": {"message": "loading"}}), streamed_reply()]
    response, _ = call(server, "openai/test-model", True)
    assert [call.name for call in response.tool_calls] == ["bash"] and len(server.requests) == 2
    assert sent(server.requests[0]) == sent(server.requests[1])


def test_what_goes_to_litellm_as_before(server):
    """A name in litellm's price table, extra litellm options, or a conversation past its first prompt."""
    assert LiteLLMModel("openai/gpt-4o", api_base=server.base)._light is None
    for model in (LiteLLMModel("openai/gpt-4o", api_base=server.base),
                  LiteLLMModel("openai/test-model", api_base=server.base, extra={"top_k": 3}),
                  LiteLLMModel("anthropic/some-model", api_base=server.base),
                  LiteLLMModel("openai/test-model")):
        model.start_light()
        assert model._light is None, model.name
    server.replies.append((200, completion({"content": "Done."})))
    later = MESSAGES + [{"role": "assistant", "content": "", "tool_calls": [tool_call("{}")]},
                        {"role": "tool", "tool_call_id": "call_a", "content": "ok"}]
    response, _ = call(server, "openai/test-model", True, later)
    assert response.content == "Done."


def test_the_first_request_goes_out_before_litellm_is_imported(tmp_path):
    """In a fresh process: the check, the provider, tool calling, the request and its reply need no litellm (its
    import, started meanwhile, is held back here until the request has arrived; the light reply does not wait
    for it, so whether it is done by the end is the thread's business)."""
    code = """
import json, sys, threading
from tests.support.fake_server import FakeServer, MESSAGES, completion
from tests.support.tools import TOOLS
from codeagent.models import LiteLLMModel, Sampling, litellm_model
server = FakeServer()
arrived, seen = [], threading.Event()
load = litellm_model._LOADER._load
litellm_model._LOADER._load = lambda: seen.wait() and load()  # the import waits for the request
class Replies(list):
    def pop(self, index=-1):
        arrived.append("litellm" in sys.modules)  # the request has arrived
        seen.set()
        return super().pop(index)
server.replies = Replies([(200, completion({"content": "hi"}))])
model = LiteLLMModel("openai/test-model", api_base=server.base)
model.start_light(); model.check()
assert (model.provider, model.uses_native_tools()) == ("openai", True) and "litellm" not in sys.modules
response = model.complete(MESSAGES, TOOLS, Sampling())
print(json.dumps([arrived, response.content, model.provider]))
server.close()
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [[False], "hi", "openai"]
