"""The session's plain-data parts: Stats.observe, the patch history, saved-session lookup."""

import pytest

from codeagent.events import Finished, ModelOutput, PatchChanged, StepStarted
from codeagent.run.session.patch_history import PatchHistory
from codeagent.run.session.stats import Stats
from codeagent.trajectory.sessions import find_session, recent_sessions
from codeagent.trajectory.store import TrajectoryError, TrajectoryStore


def test_stats_observe_counts_tokens_and_cost_and_the_furthest_step():
    stats = Stats()
    for event in (StepStarted(run_id="a", step=0), ModelOutput(run_id="a", prompt_tokens=100, completion_tokens=5,
                                                                cost=0.01),
                  StepStarted(run_id="b", step=2), StepStarted(run_id="a", step=1),
                  ModelOutput(run_id="b", prompt_tokens=50, completion_tokens=None, cost=None)):
        stats.observe(event)
    assert (stats.steps, stats.prompt_tokens, stats.completion_tokens, stats.tokens) == (3, 150, 5, 155)
    assert stats.cost == pytest.approx(0.01)


def test_patch_history_records_changes_and_steps_back():
    history = PatchHistory()
    assert not history.can_undo
    first = "diff --git a/x b/x\n+1\n"
    second = first + "diff --git a/y b/y\n+2\n"
    history.observe(PatchChanged(step=0, patch=first), steps=1)
    history.observe(Finished(patch=first), steps=2)  # the same patch: no change
    history.observe(Finished(patch=second), steps=3)
    change = history.last_change()
    assert (change.step, change.before, change.after, change.files) == (2, first, second, ["y"])
    history.drop_last()
    assert history.current == first and history.can_undo
    history.reset("z")
    assert history.current == "z" and not history.can_undo


def test_saved_sessions_are_this_repositorys_newest_first(tmp_path):
    store = TrajectoryStore(tmp_path / "store")
    for index, repo in enumerate(["/r/one", "/r/two", "/r/one"]):
        with store.create(id=f"2026010{index + 1}-000000-abc", task={"repo": repo, "problem_statement": f"issue {index}\nmore"}):
            pass
    recent = recent_sessions(store, "/r/one")
    assert [(h.id, h.issue) for h in recent] == [("20260103-000000-abc", "issue 2"), ("20260101-000000-abc", "issue 0")]
    assert find_session(store, "last", "/r/two") == "20260102-000000-abc"
    assert find_session(store, "20260101", "/r/one") == "20260101-000000-abc"
    with pytest.raises(TrajectoryError, match="no saved session for /r/none"):
        find_session(store, None, "/r/none")
