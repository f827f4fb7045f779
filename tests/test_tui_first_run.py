"""The TUI's first minutes: a folder it cannot work on is said at start, before the issue is typed,
with what to do about it (and no Docker hint: Docker is not the problem)."""

from __future__ import annotations

from codeagent.config import Config
from codeagent.models import ScriptedModel
from codeagent.trajectory.store import TrajectoryStore
from codeagent.tui.app import CodeagentApp
from codeagent.tui.session import Session

from .test_tui_app import quit_app, screen_text, send, sync, until


@sync
async def test_a_folder_that_is_not_a_repository_is_reported_at_start(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "todo.txt").write_text("buy milk\n")
    session = Session(Config(), ScriptedModel([]), repo=str(folder), store=TrajectoryStore(tmp_path / "trajs"))
    app = CodeagentApp(session)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.2)
        shown = " ".join(screen_text(app).split())
        assert "is not a git repository" in shown and "git init" in shown, shown
        assert "Fix that" in shown and "Docker" not in shown and "sandbox build" not in shown
        assert session.task is None and session.slot.state != "failed"  # nothing was started
        await send(pilot, "Sort the list.")  # typed anyway: the same advice, still no Docker hint
        await until(pilot, lambda: not session.busy and shown.count("git init") < " ".join(screen_text(app).split()).count("git init"),
                    what="the second notice")
        assert "Docker" not in screen_text(app)
        await quit_app(pilot, session)
