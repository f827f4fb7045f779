"""The daily loop in the TUI (issue 24, items 9 and 10), through Textual's pilot with the scripted
model in a real Docker sandbox: what the status bar says while an approval waits, the bell, denied
calls, the header after a mode switch, the command and file popups, the session picker, /compact
and the context meter, steering best-of-N."""

from __future__ import annotations

import pytest

from codeagent.tui.approval_screen import ApprovalScreen

from .test_tui_app import approve, make_app, quit_app, screen_text, send, sync, type_line, until
from .test_tui_session import FILES, call, fix_add

pytestmark = pytest.mark.usefixtures("no_leaks")


def status_text(app) -> str:
    return str(app.status_bar.render())


@sync
async def test_an_approval_says_waiting_for_you_rings_and_a_denied_call_is_not_an_error(make_repo, tmp_path):
    repo = make_repo(FILES)
    app, session, _ = make_app(repo, tmp_path, [call("bash", command="rm README.md"), fix_add(), call("submit")])
    rings = []
    app.bell = lambda: rings.append(len(rings))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("shift+tab", "shift+tab", "shift+tab")  # suggest -> auto-edit -> full-auto -> suggest
        await pilot.press("shift+tab")
        await pilot.pause(0.1)
        shown = screen_text(app)
        assert "· auto-edit mode" in shown and "suggest mode" not in shown, shown
        await pilot.press("shift+tab", "shift+tab")  # back to suggest: edits ask too
        await type_line(pilot, "add() subtracts")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the dialog")
        await pilot.pause(0.1)
        assert "waiting for you" in status_text(app) and "working" not in status_text(app)
        assert rings, "no bell for the approval"
        await approve(pilot, "n", "enter", title="Run this command?")
        await pilot.pause(0.1)
        assert "waiting for you" not in status_text(app)
        await approve(pilot, "y", title="Edit calc.py?")
        await until(pilot, lambda: session.last_status == "submitted" and not session.busy, what="the run")
        await pilot.pause(0.1)
        block = next(b for b in app.transcript.blocks.values() if b.summary == "$ rm README.md")
        assert block._status == ("denied", "bold magenta")  # its own style: not an error in red
        assert "$ rm README.md · denied" in screen_text(app)
        assert len(rings) >= 3, rings  # two approvals and the end of the run
        await quit_app(pilot, session)
