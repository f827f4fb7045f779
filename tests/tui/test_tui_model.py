"""`/model NAME [--api-base URL]` in the TUI (Textual's pilot): the name is checked, the model is asked
one cheap request before the switch, a failure is one line and the session keeps its model; a switch
is recorded with the session, so that a resume goes on with it."""

from __future__ import annotations

import pytest

from tests.support.processes import free_port
from tests.support.tui import make_app, screen_text, send, sync, until

pytestmark = pytest.mark.timeout(120)


def notices(app) -> str:
    return " ".join(screen_text(app).split())


def test_model_arguments():
    from codeagent.run.session.slash import model_switch

    assert model_switch("gpt-4o") == ("gpt-4o", None)
    assert model_switch("hosted_vllm/q --api-base http://h:8000/v1") == ("hosted_vllm/q", "http://h:8000/v1")
    assert model_switch("q --api-base=https://h/v1") == ("q", "https://h/v1")
    for bad in ("gpt 4o", "--api-base http://h/v1", "q --api-base", "q --api-base h:8000", "q --base http://h"):
        with pytest.raises(ValueError):
            model_switch(bad)


@sync
async def test_a_bad_model_is_one_line_and_not_switched(make_repo, tmp_path):
    app, session, _ = make_app(make_repo({"a.py": "x = 1\n"}), tmp_path, [])
    before = session.model
    port = free_port()
    async with app.run_test(size=(120, 30)) as pilot:
        await send(pilot, "/model gpt 4o")
        await until(pilot, lambda: "a model name has no spaces" in notices(app), what="the refusal")
        await send(pilot, f"/model openai/served --api-base http://127.0.0.1:{port}/v1")
        await until(pilot, lambda: "Model not switched" in notices(app), timeout=60, what="the failed check")
        assert f"cannot connect to 127.0.0.1:{port}" in notices(app)
        assert session.model is before and session.agent.model is before
        await pilot.press("ctrl+q")


@pytest.mark.usefixtures("no_leaks")
@sync
async def test_a_model_that_answers_is_switched_and_the_session_keeps_it(make_repo, tmp_path, server):
    from tests.support.fake_server import completion

    app, session, _ = make_app(make_repo({"a.py": "x = 1\n"}), tmp_path, [])
    session.model.turns.append({"role": "assistant", "content": "a.py sets x to 1."})
    server.replies.append((200, completion({"content": "Still 1."})))
    try:
        await converse(app, session, server)
    finally:
        session.close()  # also when a step above failed: no sandbox is left behind
    saved = session.store.load(session.trajectory_id)  # what `codeagent solve --resume ID` goes on with
    assert (saved.model, saved.model_api_base) == ("hosted_vllm/served", server.base)


async def converse(app, session, server) -> None:
    """An answer from the first model, `/model` to a served one, an answer from it."""
    async with app.run_test(size=(120, 30)) as pilot:
        await send(pilot, "What does a.py set?")
        await until(pilot, lambda: session.last_status == "answered" and not session.busy, timeout=90,
                    what="the first answer")
        await send(pilot, f"/model hosted_vllm/served --api-base {server.base}")
        await until(pilot, lambda: session.model.name == "hosted_vllm/served", timeout=60, what="the switch")
        assert session.model.api_base == server.base and session.agent.model is session.model
        assert "Model: hosted_vllm/served at " in notices(app)
        assert not server.requests  # the check was GET /models (free): no completion asked for
        await send(pilot, "And now?")
        await until(pilot, lambda: len(server.requests) == 1 and session.last_status == "answered"
                    and not session.busy, timeout=90, what="the answer of the new model")
        await pilot.press("ctrl+q")
        await until(pilot, lambda: not app.is_running or session.sandbox_state == "closed", what="quit")
