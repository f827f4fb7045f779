"""The TUI's first minutes: a folder it cannot work on is said at start, before the issue is typed,
with what to do about it (and no Docker hint: Docker is not the problem)."""

from __future__ import annotations

from codeagent.config import Config
from codeagent.models import ScriptedModel
from codeagent.run.session import Session
from codeagent.trajectory.store import TrajectoryStore
from codeagent.tui.app import CodeagentApp
from tests.support.tui import quit_app, screen_text, send, sync, until


@sync
async def test_a_commit_that_is_not_there_is_reported_at_start(make_repo, tmp_path):
    repo = make_repo({"todo.txt": "buy milk\n"})
    session = Session(Config(), ScriptedModel([]), repo=str(repo), commit="no-such-commit",
                      store=TrajectoryStore(tmp_path / "trajs"))
    app = CodeagentApp(session)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.2)
        shown = " ".join(screen_text(app).split())
        assert "no-such-commit" in shown and "Fix that" in shown, shown
        assert "Docker" not in shown and "sandbox build" not in shown
        assert session.task is None and session.slot.state != "failed"  # nothing was started
        await send(pilot, "Sort the list.")  # typed anyway: the same advice, still no Docker hint
        await until(pilot, lambda: not session.busy and shown.count("Fix that") < " ".join(screen_text(app).split()).count("Fix that"),
                    what="the second notice")
        assert "Docker" not in screen_text(app)
        await quit_app(pilot, session)


@sync
async def test_a_folder_outside_git_is_no_problem(tmp_path):
    """Outside git the folder's files are the start (a snapshot): nothing to report at start."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "todo.txt").write_text("buy milk\n")
    session = Session(Config(), ScriptedModel([]), repo=str(folder), store=TrajectoryStore(tmp_path / "trajs"))
    app = CodeagentApp(session)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.2)
        shown = " ".join(screen_text(app).split())
        assert "Fix that" not in shown and "not a git repository" not in shown, shown
        await quit_app(pilot, session)
