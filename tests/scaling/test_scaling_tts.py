"""Test-time scaling beyond best-of-N, in real Docker sandboxes with scripted models on the cart example:
evolution (rounds conditioned on the best so far and their feedback), tree search (branches from recorded
prefixes), the tournament (a judge's pairwise knock-out), all under one budget; every run a trajectory with
its lineage."""

from __future__ import annotations

import pytest

from codeagent.config import Config
from codeagent.events import EventBus
from codeagent.run.examples import example_as_task
from codeagent.sandbox import open_sandbox, snapshot
from codeagent.scaling.budget import Budget
from codeagent.scaling.pipeline import scale
from codeagent.scaling.progress import SearchProgress
from codeagent.trajectory.store import TrajectoryStore
from tests.support.tts import WRONG, judge_says, learns_from_feedback, wrong_then_right

pytestmark = pytest.mark.usefixtures("no_leaks")


@pytest.fixture
def task():
    return example_as_task("cart")


def factory(task):
    snap = snapshot(task.repo, task.base_commit)
    return lambda: open_sandbox(snap)


def fixes_wrongly(candidate) -> bool:
    return f"+{WRONG}" in candidate.patch and "raise ValueError(sku)" not in candidate.patch


def configured(tmp_path, **scaling) -> Config:
    return Config(trajectories_dir=str(tmp_path / "store"), agent={"localize": False},
                  scaling={"verifiers": ["regression"], **scaling})


def test_evolution_shows_the_next_round_the_best_patch_and_its_feedback(task, tmp_path):
    config = configured(tmp_path, tts="evolve", candidates=4, population=2, parents=1, max_parallel=2)
    events: list = []
    result = scale(task, config, factory(task), model_factory=learns_from_feedback(), events=EventBus(events.append))
    by_index = {c.index: c for c in result.candidates}
    assert [by_index[i].round for i in range(4)] == [0, 0, 1, 1]
    assert all(fixes_wrongly(by_index[i]) and by_index[i].scores["regression"] < 1 for i in (0, 1))
    assert all("raise ValueError(sku)" in by_index[i].patch and by_index[i].scores["regression"] == 1 for i in (2, 3))
    assert by_index[2].parents == by_index[3].parents == [0]  # the two wrong patches are one answer: one parent
    assert result.chosen.round == 1 and result.chosen.index in (2, 3)
    store = TrajectoryStore(config.trajectory_root())
    child = store.load(by_index[2].trajectory_id)
    assert (child.tts, child.round, child.parents) == ("evolve", 1, [by_index[0].trajectory_id])
    prompt = child.messages[1]["content"]
    assert "Earlier attempts" in prompt and "del self._lines[sku]" in prompt and "test_remove_some_units" in prompt
    assert task.problem_statement.strip()[:60] in prompt
    assert store.load(by_index[0].trajectory_id).round == 0 and child.verification["scores"] == {"regression": 1.0}
    rounds = [e for e in events if isinstance(e, SearchProgress)]
    assert [e.round for e in rounds] == [0, 1, -1] and rounds[-1].done and "4 runs" in rounds[-1].note


def test_search_branches_from_a_recorded_prefix_with_its_patch_restored(task, tmp_path):
    config = configured(tmp_path, tts="search", candidates=3, max_parallel=1)
    result = scale(task, config, factory(task), model_factory=wrong_then_right())
    by_index = {c.index: c for c in result.candidates}
    assert fixes_wrongly(by_index[0]) and "raise ValueError(sku)" in by_index[1].patch
    # UCT: after two fresh runs, the state right after the better run's edit is the most promising
    branch = by_index[2]
    assert branch.parents == [1] and branch.details["branch"]["from_candidate"] == 1
    assert branch.patch == by_index[1].patch and branch.details["inherited"]  # it only resubmitted its start
    store = TrajectoryStore(config.trajectory_root())
    source, copy = store.load(by_index[1].trajectory_id), store.load(branch.trajectory_id)
    cut = copy.branch_messages
    assert cut == 4 and copy.messages[:cut] == source.messages[:cut]  # system, issue, the edit and its result
    assert (copy.tts, copy.parents, len(copy.steps)) == ("search", [source.id], 1)
    assert copy.steps[0].index == 1  # numbered after the prefix's step
    assert result.selection.chosen == 1 and 2 not in result.selection.ranking  # a resubmission is no second vote


def test_tournament_judge_decides_the_match_and_its_tokens_count(task, tmp_path):
    config = configured(tmp_path, candidates=2, max_parallel=2, verifiers=["regression", "judge"],
                        policy="tournament", judge_model="judge")
    budget = Budget.from_settings(config.scaling)
    result = scale(task, config, factory(task), model_factory=judge_says("B", wrong_then_right()), budget=budget)
    right = next(c for c in result.candidates if "raise ValueError(sku)" in c.patch)
    wrong = next(c for c in result.candidates if fixes_wrongly(c))
    assert result.selection.policy == "tournament" and len(result.selection.matches) == 1
    match = result.selection.matches[0]
    assert (match["first"], match["second"]) == (right.index, wrong.index)  # the better seed is shown first
    assert match["decided_by"] == "judge" and result.selection.chosen == wrong.index  # the judge said B
    runs_tokens = sum(c.tokens or 0 for c in result.candidates)
    assert budget.spent_tokens > runs_tokens  # the judge's replies (P(YES) and the match) were charged


def test_a_token_budget_and_a_stop_end_the_method(task, tmp_path):
    config = configured(tmp_path, tts="search", budget_tokens=10_000, max_parallel=1)
    budget = Budget.from_settings(config.scaling)
    events: list = []

    def stop_after_two(event):
        events.append(event)
        if isinstance(event, SearchProgress) and event.round == 1:
            budget.stop("stopped by the user")

    result = scale(task, config, factory(task), model_factory=wrong_then_right(), budget=budget,
                   events=EventBus(stop_after_two))
    assert len(result.candidates) == 2 and result.selection.chosen is not None
    done = [e for e in events if isinstance(e, SearchProgress) and e.done]
    assert "stopped by the user" in done[0].note
    small = configured(tmp_path, tts="evolve", population=2, budget_tokens=1)
    events.clear()
    result = scale(task, small, factory(task), model_factory=wrong_then_right(), events=EventBus(events.append))
    assert len(result.candidates) == 1 and result.budget["spent_tokens"] >= 1  # one run: its cost was not known
    done = [e for e in events if isinstance(e, SearchProgress) and e.done]
    assert "the budget of 1 generated tokens is spent" in done[0].note


def test_evolution_goes_on_from_its_frontier_with_a_new_budget(task, tmp_path):
    """`/candidates more`: the result's frontier, given back with another budget, runs the next round from
    the best so far; selection is among every candidate of both calls."""
    config = configured(tmp_path, tts="evolve", candidates=2, population=2, parents=1, max_parallel=2)
    first = scale(task, config, factory(task), model_factory=learns_from_feedback())
    assert [c.round for c in first.candidates] == [0, 0] and all(fixes_wrongly(c) for c in first.candidates)
    events: list = []
    more = scale(task, config, factory(task), model_factory=learns_from_feedback(), resume=first.frontier,
                 events=EventBus(events.append))
    by_index = {c.index: c for c in more.candidates}
    assert sorted(by_index) == [0, 1, 2, 3] and [by_index[i].round for i in (2, 3)] == [1, 1]
    assert by_index[2].parents == [0] and "raise ValueError(sku)" in by_index[2].patch
    assert more.chosen.index in (2, 3) and set(more.selection.ranking) >= {0, 2}
    assert [e.round for e in events if isinstance(e, SearchProgress)] == [1, -1]  # no round 0 again
    with pytest.raises(ValueError, match="cannot go on with 'search'"):
        scale(task, configured(tmp_path, tts="search", candidates=1), factory(task),
              model_factory=learns_from_feedback(), resume=more.frontier)


def test_search_goes_on_expanding_the_same_tree(task, tmp_path):
    config = configured(tmp_path, tts="search", candidates=2, max_parallel=1)
    first = scale(task, config, factory(task), model_factory=wrong_then_right())
    states = len(first.frontier.tree)
    assert len(first.candidates) == 2 and states > 1
    more = scale(task, configured(tmp_path, tts="search", candidates=1, max_parallel=1), factory(task),
                 model_factory=wrong_then_right(), resume=first.frontier)
    branch = {c.index: c for c in more.candidates}[2]
    # the third run is the one the first call would have made: a branch from the better run's recorded state
    assert branch.parents == [1] and branch.details["branch"]["from_candidate"] == 1
    assert more.frontier.tree[:states] == first.frontier.tree[:states] and more.selection.chosen == 1
