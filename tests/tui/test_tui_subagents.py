"""The TUI shows a subagent's work as nested lines in the transcript (Textual's pilot, real Docker)."""

from __future__ import annotations

import pytest

from codeagent.config import Config
from codeagent.run.session import Session
from codeagent.trajectory.store import TrajectoryStore
from codeagent.tui.app import CodeagentApp
from tests.support.scripted import answer
from tests.support.subagents import Routed, call, reply
from tests.support.tui import screen_text, sync, type_line, until

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(180)]


@sync
async def test_a_subagent_is_a_line_when_it_starts_and_one_when_it_ends(make_repo, tmp_path):
    model = Routed([reply(call("subagent", task="Find where VALUE is set.", tools="read_only")),
                    answer("It is set in a.py.")],
                   {"Find where VALUE is set.": [reply(call("bash", command="grep -n VALUE a.py")),
                                                 answer("a.py line 1.")]})
    session = Session(Config(agent={"localize": False, "subagents": True}), model, repo=str(make_repo({"a.py": "VALUE = 1\n"})),
                      mode="full-auto", store=TrajectoryStore(tmp_path / "trajectories"))
    app = CodeagentApp(session)
    async with app.run_test(size=(120, 40)) as pilot:
        await type_line(pilot, "where")
        await until(pilot, lambda: session.last_status == "answered" and not session.busy, timeout=120, what="the run")
        await pilot.pause(0.1)
        shown = " ".join(screen_text(app).split())
        assert "↳ subagent sub-1 (read_only) started: Find where VALUE is set." in shown
        assert "↳ subagent sub-1 finished: answered, 2 steps, 0 patch lines" in shown
        await pilot.press("ctrl+q")
        await until(pilot, lambda: not app.is_running or session.sandbox_state == "closed", what="quit")
