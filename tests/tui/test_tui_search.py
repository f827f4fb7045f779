"""The TUI's search panel: evolution's rounds as they come, Ctrl-C stops the method (the runs in flight end,
then one is selected), /candidates pick N chooses another; with the scripted model in real Docker sandboxes."""

from __future__ import annotations

import pytest

from codeagent.config import Config
from codeagent.models import ScriptedModel
from codeagent.run.session import Session
from codeagent.trajectory.store import TrajectoryStore
from codeagent.tui.app import CodeagentApp
from tests.support.scripted import FILES, call
from tests.support.tui import quit_app, screen_text, send, sync, type_line, until

pytestmark = pytest.mark.usefixtures("no_leaks")


def evolving_model() -> ScriptedModel:
    """The wrong sign from the issue alone, the right one once shown earlier attempts; submit after an edit."""
    def decide(messages):
        if any(m["role"] == "assistant" for m in messages):
            return call("submit")
        first = next(m["content"] for m in messages if m["role"] == "user")
        new = "a + b" if "Earlier attempts" in first else "b - a"
        return call("editor", command="str_replace", path="calc.py", old_str="a - b", new_str=new)

    return ScriptedModel([decide] * 400)


def evolving_session(repo, tmp_path, candidates: int) -> Session:
    """Evolution with one run a round, each shown the best so far, selected by votes."""
    config = Config(agent={"localize": False}, trajectories_dir=str(tmp_path / "t"),
                    scaling={"tts": "evolve", "candidates": candidates, "population": 1, "parents": 1,
                             "max_parallel": 1, "verifiers": [], "policy": "vote"})
    return Session(config, evolving_model(), repo=str(repo), mode="full-auto", store=TrajectoryStore(tmp_path / "t"))


@sync
async def test_the_panel_follows_evolution_ctrl_c_stops_it_and_pick_chooses(make_repo, tmp_path):
    session = evolving_session(make_repo(FILES), tmp_path, candidates=40)
    app = CodeagentApp(session)
    async with app.run_test(size=(140, 40)) as pilot:
        await type_line(pilot, "add() subtracts")
        await until(pilot, lambda: app.search.progress is not None and app.search.progress.round >= 1, timeout=120,
                    what="a second round")
        shown = screen_text(app)
        assert "evolve · round" in shown and "← 0" in shown and "Ctrl-C stops" in shown
        await pilot.press("ctrl+c")
        await until(pilot, lambda: session.trajectory_id and not session.busy, timeout=120, what="the selection")
        await pilot.pause(0.2)
        progress = app.search.progress
        assert progress.done and "stopped by the user" in progress.note and len(progress.nodes) < 40
        assert "selected:" in screen_text(app)
        first = min(session.state.candidates)
        assert "b - a" in session.state.candidates[first].patch  # round 0: from the issue alone
        await send(pilot, f"/candidates pick {first}")
        await until(pilot, lambda: "+    return b - a" in session.patch and not session.busy, what="the pick")
        assert app.diff.patch == session.patch
        await quit_app(pilot, session)


@sync
async def test_candidates_more_goes_on_from_where_the_method_stopped(make_repo, tmp_path):
    """/candidates more: evolution's next rounds, shown the best so far, under another budget; the selection is
    among every candidate (the votes of the new rounds decide a tie of the first)."""
    session = evolving_session(make_repo(FILES), tmp_path, candidates=2)
    app = CodeagentApp(session)
    async with app.run_test(size=(140, 40)) as pilot:
        await send(pilot, "/candidates more")
        await until(pilot, lambda: "no candidates to go on from" in screen_text(app), what="the refusal")
        await type_line(pilot, "add() subtracts")
        await until(pilot, lambda: session.trajectory_id and not session.busy and len(session.state.candidates) == 2,
                    timeout=120, what="the first selection")
        first_rounds = sorted(c.round for c in session.state.candidates.values())
        assert first_rounds == [0, 1]
        await send(pilot, "/candidates more")
        await until(pilot, lambda: "Going on from the 2 candidates so far" in screen_text(app), what="the notice")
        await until(pilot, lambda: len(session.state.candidates) == 4 and not session.busy
                    and app.search.progress is not None and app.search.progress.done, timeout=180,
                    what="two more rounds and the selection")
        await pilot.pause(0.2)
        later = [session.state.candidates[i] for i in (2, 3)]
        assert [c.round for c in later] == [2, 3] and all(c.parents for c in later)
        assert all("a + b" in c.patch for c in later)
        await until(pilot, lambda: "+    return a + b" in session.patch, what="the new selection")
        await quit_app(pilot, session)
