"""LiteLLMModel against a real OpenAI-compatible HTTP server running in the test process."""

import subprocess
import sys

import pytest

from codeagent.models import (
    ContextWindowExceeded,
    LiteLLMModel,
    ModelConfigError,
    ModelRequestError,
    ModelUnavailable,
    Sampling,
)
from tests.support.fake_server import MESSAGES, FakeServer, completion, tool_call
from tests.support.tools import TOOLS


def model_for(server, name="openai/test-model", **options):
    options.setdefault("retries", 3)
    options.setdefault("backoff_base", 0.01)
    return LiteLLMModel(name, api_base=server.base, **options)


def test_constructing_does_not_import_litellm():
    code = (
        "import sys\n"
        "from codeagent.models import LiteLLMModel, make_model\n"
        "LiteLLMModel('gpt-4o', api_base='http://127.0.0.1:9'); make_model('openai/x')\n"
        "assert 'litellm' not in sys.modules, 'litellm imported at construction'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_native_tool_call(server):
    server.replies.append((200, completion({"content": "Listing.", "tool_calls": [tool_call('{"command": "ls -la"}')]}, "tool_calls")))
    response = model_for(server).complete(MESSAGES, TOOLS, Sampling(temperature=0.3, max_tokens=256, seed=7))
    assert response.format_error is None
    assert response.content == "Listing."
    [call] = response.tool_calls
    assert (call.id, call.name, call.arguments, call.raw_arguments) == ("call_a", "bash", {"command": "ls -la"}, '{"command": "ls -la"}')
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (120, 30)
    assert response.usage.cost is None  # no price known for a local model
    assert response.finish_reason == "tool_calls"
    [request] = server.requests
    assert request["path"] == "/v1/chat/completions"
    body = request["body"]
    assert body["tools"] == TOOLS and body["messages"] == MESSAGES
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.3, 256, 7)
    assert request["headers"]["Authorization"] == "Bearer EMPTY"
    assert response.to_message() == {
        "role": "assistant",
        "content": "Listing.",
        "tool_calls": [tool_call('{"command": "ls -la"}')],
    }


def test_rate_limit_is_retried(server):
    server.replies += [
        (429, {"error": {"message": "slow down", "type": "rate_limit_error"}}),
        (503, {"error": {"message": "overloaded"}}),
        (200, completion({"content": "done"})),
    ]
    response = model_for(server).complete(MESSAGES, TOOLS, Sampling())
    assert response.content == "done"
    assert len(server.requests) == 3


def test_transient_failures_give_up_after_retries(server):
    server.replies += [(500, {"error": {"message": "boom"}})] * 3
    with pytest.raises(ModelUnavailable) as raised:
        model_for(server, retries=2).complete(MESSAGES, TOOLS, Sampling())
    assert len(server.requests) == 3
    assert "3 attempts" in str(raised.value) and "boom" in str(raised.value)


def test_bad_request_is_not_retried(server):
    server.replies += [(400, {"error": {"message": "tools[0].function.parameters is invalid"}}), (200, completion({"content": "x"}))]
    with pytest.raises(ModelRequestError) as raised:
        model_for(server).complete(MESSAGES, TOOLS, Sampling())
    assert len(server.requests) == 1
    assert "tools[0].function.parameters is invalid" in str(raised.value)


def test_context_window_exceeded(server):
    message = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."
    server.replies.append((400, {"error": {"message": message, "code": "context_length_exceeded"}}))
    with pytest.raises(ContextWindowExceeded):
        model_for(server).complete(MESSAGES, TOOLS, Sampling())
    assert len(server.requests) == 1


def test_bad_api_key_is_a_config_error(server):
    server.replies += [(401, {"error": {"message": "Incorrect API key provided"}}), (200, completion({"content": "x"}))]
    with pytest.raises(ModelConfigError) as raised:
        model_for(server, api_key="sk-wrong").complete(MESSAGES, TOOLS, Sampling())
    assert len(server.requests) == 1
    assert "API key" in str(raised.value)
    assert server.requests[0]["headers"]["Authorization"] == "Bearer sk-wrong"


def test_unknown_model_is_a_config_error(server):
    server.replies.append((404, {"error": {"message": "The model `nope` does not exist"}}))
    with pytest.raises(ModelConfigError, match="not found"):
        model_for(server, name="openai/nope").complete(MESSAGES, TOOLS, Sampling())


def test_missing_key_without_server_says_what_to_set(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelConfigError, match="OPENAI_API_KEY"):
        LiteLLMModel("gpt-4o").complete(MESSAGES, TOOLS, Sampling())


def test_invalid_json_arguments_give_the_parse_error(server):
    server.replies.append((200, completion({"content": None, "tool_calls": [tool_call('{"command": "ls"')]}, "tool_calls")))
    response = model_for(server).complete(MESSAGES, TOOLS, Sampling())
    assert response.tool_calls == []
    assert "not valid JSON" in response.format_error
    assert "Expecting ',' delimiter" in response.format_error and "char 16" in response.format_error
    assert '{"command": "ls"' in response.format_error  # what the model wrote, quoted


def test_call_with_no_name_or_unknown_tool(server):
    server.replies.append((200, completion({"content": None, "tool_calls": [tool_call("{}", name="")]}, "tool_calls")))
    server.replies.append((200, completion({"content": None, "tool_calls": [tool_call("{}", name="rm")]}, "tool_calls")))
    model = model_for(server)
    assert "has no function name" in model.complete(MESSAGES, TOOLS, Sampling()).format_error
    assert "unknown tool 'rm'" in model.complete(MESSAGES, TOOLS, Sampling()).format_error


def test_empty_and_garbage_replies(server):
    server.replies.append((200, completion({"content": ""}, "length")))
    server.replies.append((200, completion({"content": "\x00}{ lorem ipsum ]]"})))
    model = model_for(server)
    empty = model.complete(MESSAGES, TOOLS, Sampling())
    assert "empty reply" in empty.format_error and "finish_reason=length" in empty.format_error
    garbage = model.complete(MESSAGES, TOOLS, Sampling())
    assert garbage.format_error is None and garbage.tool_calls == []  # plain text is a valid reply
    assert garbage.content == "\x00}{ lorem ipsum ]]"


def test_garbage_http_body_is_retried_then_reported(server):
    server.replies += [(200, b"<html>proxy error</html>")] * 2
    with pytest.raises(ModelUnavailable) as raised:
        model_for(server, retries=1).complete(MESSAGES, TOOLS, Sampling())
    assert len(server.requests) == 2
    assert "Expecting value" in str(raised.value)


def test_text_protocol_fallback(server):
    reply = 'I will list files.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'
    server.replies.append((200, completion({"content": reply})))
    model = model_for(server, native_tools=False)
    history = MESSAGES + [
        {"role": "assistant", "content": None, "tool_calls": [tool_call('{"command": "pwd"}', call_id="c0")]},
        {"role": "tool", "tool_call_id": "c0", "content": "/repo"},
    ]
    response = model.complete(history, TOOLS, Sampling())
    assert response.format_error is None
    assert response.content == "I will list files."
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("bash", {"command": "ls"})]
    sent = server.requests[0]["body"]
    assert "tools" not in sent
    assert "<tools>" in sent["messages"][0]["content"] and '"name": "bash"' in sent["messages"][0]["content"]
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "user"]
    assert "<tool_response>\n/repo\n</tool_response>" == sent["messages"][3]["content"]


def test_text_protocol_format_error(server):
    server.replies.append((200, completion({"content": '<tool_call>{"name": "bash", "arguments": {"command": "ls"}'})))
    response = model_for(server, native_tools=False).complete(MESSAGES, TOOLS, Sampling())
    assert response.tool_calls == [] and "unclosed <tool_call>" in response.format_error


def test_cost_for_a_priced_model_and_token_ids(server):
    logprobs = {"content": [{"token": "token_id:17", "logprob": -0.5, "bytes": None, "top_logprobs": []},
                            {"token": "token_id:4", "logprob": -0.25, "bytes": None, "top_logprobs": []}]}
    server.replies.append((200, completion({"content": "ok"}, model="gpt-4o", logprobs=logprobs)))
    response = model_for(server, name="openai/gpt-4o").complete(MESSAGES, [], Sampling())
    assert response.usage.cost is not None and response.usage.cost > 0
    assert response.token_ids == [17, 4] and response.logprobs == [-0.5, -0.25]


def test_count_tokens_uses_a_real_tokenizer():
    model = LiteLLMModel("openai/gpt-4o", api_base="http://127.0.0.1:9")
    short = model.count_tokens([{"role": "user", "content": "hello"}])
    long = model.count_tokens([{"role": "user", "content": "hello world " * 100}])
    assert 0 < short < 10 and 190 < long < 230


def test_a_hanging_server_is_given_up_on_within_the_total_timeout(server):
    server.replies += [FakeServer.HANG] * 10
    model = model_for(server, timeout=1.0, retries=8, total_timeout=2.5)
    with pytest.raises(ModelUnavailable) as raised:
        model.complete(MESSAGES, TOOLS, Sampling())
    assert "no answer within 2.5s" in str(raised.value)
    assert 1 <= len(server.requests) <= 3  # not the 9 attempts the retries alone would allow


def test_the_timeouts_come_from_the_model_settings():
    from codeagent.config import Config
    from codeagent.models import make_model, model_options

    config = Config(model={"name": "openai/x", "timeout": 7, "total_timeout": 30, "retries": 2})
    model = make_model("openai/x", **model_options(config.model))
    assert (model.timeout, model.total_timeout, model.retries) == (7, 30, 2)
    with pytest.raises(ModelConfigError, match="model.timeout must be"):
        make_model("openai/x", **model_options(Config(model={"timeout": 0}).model))


def test_a_server_that_does_not_give_token_ids_is_said_once_to_make_a_run_not_token_exact(server, caplog):
    """openai/... at a server that is neither codeagent serve nor vLLM: streamed, no ids asked for, and the
    log says once (not per call, and at INFO: not a warning on every run) that it will not be token-exact."""
    model = model_for(server)
    for _ in range(2):
        server.replies.append((200, completion({"content": "Done."})))
        with caplog.at_level("INFO", logger="codeagent.models.litellm_model"):
            model.complete(MESSAGES, TOOLS, Sampling(max_tokens=8))
    assert all("return_token_ids" not in str(request["body"]) for request in server.requests)
    said = [record for record in caplog.records if "not be token-exact" in record.getMessage()]
    assert len(said) == 1 and server.base.split("//")[1].split("/")[0] in said[0].getMessage()
    assert said[0].levelname == "INFO"  # not a warning at every run against any such server: `doctor` says it
