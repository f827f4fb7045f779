"""Streamed replies from a real OpenAI-compatible server on 127.0.0.1 (server-sent events, held mid-reply):
what forms is reported before the reply ends, the reply comes back whole, a given-up call hangs up.

Bounds on time are generous: they tell "ended soon after" from "waited out the server's 60 s hold".
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from codeagent.models import LiteLLMModel, Sampling, progress
from codeagent.models.cancel import Cancelled, call_cancellable
from tests.support.fake_server import MESSAGES, Streamed, chunks, completion, pieces
from tests.support.tools import TOOLS

ARGUMENTS = json.dumps({"command": "printf 'a \"quoted\" line\\n' > notes.txt && cat notes.txt"})


def model_for(server, **options):
    return LiteLLMModel("openai/test-model", api_base=server.base, retries=2, backoff_base=0.01, **options)


def test_text_is_reported_before_the_reply_ends_and_the_reply_is_whole(server):
    reply = Streamed(chunks(["I will ", "look at ", "the code."], [("bash", pieces(ARGUMENTS))], "tool_calls"),
                     hold_at=3)  # after the role chunk and two pieces of text
    server.replies.append(reply)
    heard: list = []
    outcome: dict = {}

    def call():
        with progress.listening(heard.append):
            outcome["response"] = model_for(server).complete(MESSAGES, TOOLS, Sampling())

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    assert reply.held.wait(60)
    deadline = time.monotonic() + 30
    while "".join(n.text for n in heard if isinstance(n, progress.TextDelta)) != "I will look at " \
            and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "".join(n.text for n in heard if isinstance(n, progress.TextDelta)) == "I will look at "
    assert caller.is_alive() and "response" not in outcome  # the reply has not ended: it is still held
    reply.release.set()
    caller.join(30)
    response = outcome["response"]
    assert response.content == "I will look at the code." and response.format_error is None
    [call_made] = response.tool_calls
    assert (call_made.id, call_made.name, call_made.raw_arguments) == ("call_0", "bash", ARGUMENTS)
    assert call_made.arguments == json.loads(ARGUMENTS)
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (120, 30)
    assert response.finish_reason == "tool_calls"
    argument_pieces = [n for n in heard if isinstance(n, progress.ToolCallDelta)]
    assert len(argument_pieces) > 3 and argument_pieces[0].name == "bash" and argument_pieces[0].call_id == "call_0"
    assert "".join(n.arguments for n in argument_pieces) == ARGUMENTS
    body = server.requests[0]["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_streaming_can_be_turned_off_and_served_models_are_not_streamed(server):
    server.replies += [(200, completion({"content": "whole"})), (200, completion({"content": "served"}))]
    assert model_for(server, stream=False).complete(MESSAGES, [], Sampling()).content == "whole"
    served = LiteLLMModel("hosted_vllm/served", api_base=server.base, retries=0)
    assert served.complete(MESSAGES, [], Sampling()).content == "served"
    for request in server.requests:
        assert "stream" not in request["body"]  # token ids and logprobs come whole only unstreamed
    assert server.requests[1]["body"]["return_token_ids"] is True


def test_a_server_that_answers_a_stream_request_whole_is_understood(server):
    server.replies.append((200, completion({"content": "not streamed"})))
    assert model_for(server).complete(MESSAGES, [], Sampling()).content == "not streamed"
    assert len(server.requests) == 1


def test_a_retry_is_reported_with_its_attempt_reason_and_wait(server):
    server.replies += [(503, {"error": {"message": "overloaded"}}), Streamed(chunks(["fine"]))]
    heard: list = []
    with progress.listening(heard.append):
        response = model_for(server).complete(MESSAGES, [], Sampling())
    assert response.content == "fine"
    [retry] = [n for n in heard if isinstance(n, progress.Retrying)]
    assert (retry.attempt, retry.retries) == (1, 2) and "overloaded" in retry.reason and retry.wait >= 0


def test_a_stream_cut_short_is_retried_not_taken_as_the_reply(server):
    server.replies += [Streamed(chunks(["half a rep"])[:2], done=False), Streamed(chunks(["whole reply"]))]
    heard: list = []
    with progress.listening(heard.append):
        response = model_for(server).complete(MESSAGES, [], Sampling())
    assert response.content == "whole reply"
    assert [type(n).__name__ for n in heard if not isinstance(n, progress.Waiting)] == \
        ["TextDelta", "Retrying", "TextDelta"]


def test_giving_up_on_a_held_stream_hangs_up_at_once(server):
    reply = Streamed(chunks(["This reply ", "never ends"]), hold_at=2, hold_seconds=60)
    server.replies.append(reply)
    model = model_for(server)
    heard: list = []
    asked: list[float] = []

    def stop() -> str | None:
        if reply.held.is_set() and heard:
            asked.append(time.monotonic())
            return "interrupted"
        return None

    with progress.listening(heard.append), pytest.raises(Cancelled):
        call_cancellable(lambda: model.complete(MESSAGES, [], Sampling()), stop)
    assert time.monotonic() - asked[0] < 15
    assert reply.hung_up.wait(15)  # the connection was closed, not left to the request's timeout
    late = len(heard)
    reply.release.set()
    time.sleep(0.2)
    assert len(heard) == late  # an abandoned call reports nothing once its caller has left


def test_the_wait_for_a_first_token_is_reported_each_second(server):
    reply = Streamed(chunks(["late"]), hold_at=1)  # the headers and the role chunk, then nothing
    server.replies.append(reply)
    model = model_for(server)
    heard: list = []
    threading.Thread(target=lambda: reply.held.wait(60) and time.sleep(2.5) or reply.release.set(),
                     daemon=True).start()
    with progress.listening(heard.append):
        response = call_cancellable(lambda: model.complete(MESSAGES, [], Sampling()), lambda: None)
    assert response.content == "late"
    waits = [n.seconds for n in heard if isinstance(n, progress.Waiting)]
    assert waits[:2] == [1, 2] and waits == sorted(set(waits))
    assert isinstance(heard[-1], progress.TextDelta)  # no wait reported once the text came
