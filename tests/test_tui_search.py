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


@sync
async def test_the_panel_follows_evolution_ctrl_c_stops_it_and_pick_chooses(make_repo, tmp_path):
    repo = make_repo(FILES)
    config = Config(agent={"localize": False}, trajectories_dir=str(tmp_path / "t"),
                    scaling={"tts": "evolve", "candidates": 40, "population": 1, "parents": 1, "max_parallel": 1,
                             "verifiers": [], "policy": "vote"})
    session = Session(config, evolving_model(), repo=str(repo), mode="full-auto", store=TrajectoryStore(tmp_path / "t"))
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
