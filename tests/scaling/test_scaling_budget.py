"""The budget every test-time scaling method shares: runs, generated tokens, model calls, a stop."""

from __future__ import annotations

import threading

from codeagent.config import Config
from codeagent.models import ModelResponse, Sampling, ScriptedModel, ToolCall, Usage
from codeagent.scaling.budget import Budget, Metered, reply_tokens


def test_a_run_budget_lets_that_many_runs_start_in_all():
    budget = Budget(runs=5)
    assert budget.allow(4) == 4
    assert budget.allow(4) == 1 and budget.allow(1) == 0
    assert "5 runs" in budget.exhausted


def test_a_token_budget_counts_runs_in_flight_at_the_mean_cost_of_finished_ones():
    budget = Budget(tokens=100)
    assert budget.allow(4) == 1  # no run's cost is known yet: one at a time
    budget.charge(30)
    budget.done(30)
    assert budget.allow(4) == 2  # expected to fit: 30 spent + 2 x 30 <= 100 < 30 + 3 x 30
    budget.charge(60)
    budget.done(30)
    budget.done(30)
    assert budget.allow(1) == 0 and "100 generated tokens" in budget.exhausted


def test_a_step_budget_counts_model_calls():
    budget = Budget(steps=3)
    assert budget.allow(5) == 3  # each run makes one call at least
    for _ in range(3):
        budget.charge(1)
    budget.done(3)
    assert budget.allow(1) == 0


def test_stop_from_another_thread_ends_the_method_and_says_why():
    budget = Budget(runs=100)
    assert budget.allow(1) == 1
    threading.Thread(target=budget.stop).start()
    while not budget.stopped:
        pass
    assert budget.allow(3) == 0 and budget.exhausted == "stopped by the user"


def test_from_settings_candidates_or_tokens_or_two_rounds():
    assert Budget.from_settings(Config(scaling={"candidates": 3}).scaling).runs == 3
    assert Budget.from_settings(Config(scaling={"budget_tokens": 500}).scaling) == Budget(tokens=500)
    assert Budget.from_settings(Config(scaling={"tts": "evolve", "population": 3}).scaling).runs == 6


def test_metered_model_charges_every_reply_and_passes_the_rest_through():
    budget = Budget(tokens=1000)
    reply = {"role": "assistant", "content": "x" * 40}
    model = Metered(ScriptedModel([reply, reply], name="scripted-x"), budget)
    model.complete([{"role": "user", "content": "hi"}], [], Sampling())
    model.complete([{"role": "user", "content": "hi"}], [], Sampling())
    assert (model.metered_tokens, model.metered_calls, budget.spent_tokens, budget.spent_steps) == (20, 2, 20, 2)
    assert model.name == "scripted-x" and len(model.calls) == 2


def test_reply_tokens_prefers_the_backends_count_then_ids_then_an_estimate():
    assert reply_tokens(ModelResponse(content="abc", usage=Usage(completion_tokens=7))) == 7
    assert reply_tokens(ModelResponse(content="abc", token_ids=[1, 2, 3, 4])) == 4
    call = ToolCall(id="c", name="submit", arguments={"why": "done"})
    assert reply_tokens(ModelResponse(content="", tool_calls=[call])) >= 1  # a tool call alone is not free
