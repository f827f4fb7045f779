"""The TUI driven by Textual's pilot: whole sessions with the scripted model in a real Docker sandbox."""

from __future__ import annotations

import time

import pytest

from codeagent.config import Config
from codeagent.models import ModelRequestError
from codeagent.run.session import Session
from codeagent.trajectory.store import TrajectoryStore
from codeagent.tui.app import CodeagentApp
from tests.support.git import git
from tests.support.scripted import FILES, BySeed, call, fix_add
from tests.support.tui import approve, make_app, quit_app, screen_text, send, sync, type_line, until

pytestmark = pytest.mark.usefixtures("no_leaks")


@sync
async def test_a_whole_session_approve_deny_diff_undo_apply(make_repo, tmp_path):
    repo = make_repo(FILES)
    target = make_repo(FILES, name="checkout")  # where /apply writes
    turns = [call("bash", "Let me look at **calc.py**.", command="awk 1 calc.py"), fix_add("Fix the sign."),
             call("bash", command="rm README.md"), call("submit"),
             call("editor", command="insert", path="calc.py", insert_line=0, new_str="# calculator"), call("submit")]
    app, session, model = make_app(repo, tmp_path, turns)
    async with app.run_test(size=(80, 24)) as pilot:
        await type_line(pilot, "add() subtracts")
        shown = await approve(pilot, "y", title="Run this command?")
        assert "awk 1 calc.py" in shown and "Allow once [y]" in shown
        shown = await approve(pilot, "a", title="Edit calc.py?")
        assert "+    return a + b" in shown and "Always allows, this session: edits to calc.py" in shown
        await approve(pilot, "n", *"keep the README", "enter", title="Run this command?")
        await until(pilot, lambda: session.last_status == "submitted" and not session.busy, what="the run")
        assert "keep the README" in model.calls[3][-1]["content"]
        assert "+    return a + b" in app.diff.patch
        await pilot.pause(0.1)
        shown = screen_text(app)
        assert "✓ submitted · 4 steps" in shown and "/apply" in shown
        block = next(b for b in app.transcript.blocks.values() if b.summary == "$ awk 1 calc.py")
        block.query_one("CollapsibleTitle").focus()
        await pilot.press("enter")  # a tool call expands to its full output
        await pilot.pause(0.1)
        assert "def add(a, b):\n" in "\n".join(line.strip() for line in screen_text(app).splitlines()) + "\n"
        app.prompt.focus()

        await send(pilot, "Add a header comment too.")  # calc.py edits are allowed always now
        await until(pilot, lambda: "+# calculator" in app.diff.patch and not session.busy, what="the follow-up")
        assert model.calls[4][-1] == {"role": "user", "content": "Add a header comment too."}

        await type_line(pilot, "/undo")
        await until(pilot, lambda: "+# calculator" not in app.diff.patch and not session.busy, what="/undo")
        assert "+    return a + b" in app.diff.patch
        assert session.sandbox.read_file("calc.py") == b"def add(a, b):\n    return a + b\n"

        await send(pilot, "/diff")  # at 80 columns the patch takes the place of the transcript
        await pilot.pause(0.1)
        assert "+    return a + b" in screen_text(app) and "Run this command?" not in screen_text(app)
        await pilot.press("escape")

        assert "applied" not in str(app.diff._header.render())  # not yet: nothing said
        await send(pilot, f"/apply {target}")
        await until(pilot, lambda: not session.busy, what="/apply")
        assert (target / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
        await pilot.pause(0.1)  # the diff panel says the patch is in the files now
        assert f"applied to {target} (already in your files)" in str(app.diff._header.render())
        git(target, "checkout", "calc.py")
        (target / "calc.py").write_text("mine\n")
        await send(pilot, f"/apply {target}")
        await until(pilot, lambda: not session.busy, what="/apply")
        await pilot.pause(0.1)
        # nothing changed in the patch since the last /apply there: your edit stays
        assert (target / "calc.py").read_text() == "mine\n", screen_text(app)
        assert "the patch has not changed since" in " ".join(screen_text(app).split()), screen_text(app)
        await quit_app(pilot, session)
    assert session.sandbox is None


@sync
async def test_interrupt_then_quit_then_resume_the_session(make_repo, tmp_path):
    repo = make_repo(FILES)
    turns = [fix_add(), call("bash", command="sleep 60")]
    app, session, _ = make_app(repo, tmp_path, turns, mode="full-auto")
    async with app.run_test(size=(100, 30)) as pilot:
        await type_line(pilot, "add() subtracts")
        await until(pilot, lambda: "$ sleep 60 · running…" in screen_text(app), what="the long command")
        begun = time.monotonic()
        await pilot.press("ctrl+c")  # stops the step, not the app
        await until(pilot, lambda: session.last_status == "interrupted" and not session.busy, what="the interrupt")
        assert time.monotonic() - begun < 15 and app.is_running
        await pilot.pause(0.1)
        assert "Ctrl-C again to quit" in screen_text(app)
        await pilot.press("ctrl+c")  # the second press quits
        await until(pilot, lambda: session.sandbox_state == "closed", what="the sandbox to go")
    first = session.trajectory_id

    app, session, model = make_app(repo, tmp_path, [call("bash", command="awk 1 calc.py"), call("submit")],
                                   mode="full-auto", resume="last")
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: session.sandbox_state == "ready" and not session.busy, what="the resume")
        await pilot.pause(0.1)
        shown = screen_text(app)
        assert "› add() subtracts" in shown and "edit calc.py" in shown and "$ sleep 60" in shown  # the history
        await send(pilot, "Go on.")
        await until(pilot, lambda: session.last_status == "submitted" and not session.busy, what="the continuation")
        assert model.calls[0][-1] == {"role": "user", "content": "Go on."}
        assert "return a + b" in model.calls[1][-1]["content"]  # the new sandbox has the session's patch
        assert session.trajectory_id == first
        await quit_app(pilot, session)


@sync
async def test_errors_resizes_and_commands_do_not_crash_the_app(make_repo, tmp_path):
    repo = make_repo(FILES)

    def broken(messages):
        raise ModelRequestError("401 Unauthorized: invalid API key")

    app, session, _ = make_app(repo, tmp_path, [broken, call("submit")], mode="full-auto")
    async with app.run_test(size=(80, 24)) as pilot:
        await type_line(pilot, "add() subtracts")
        await until(pilot, lambda: session.last_status == "model_error" and not session.busy, what="the model error")
        await pilot.pause(0.1)
        assert "Check the model name and its API key" in screen_text(app)
        for width, height in ((40, 12), (200, 60), (80, 24)):
            await pilot.resize_terminal(width, height)
            await pilot.pause(0.05)
        for command in ("/help", "/cost", "/mode auto-edit", "/nonsense", "/resume", "/candidates", "/model"):
            await send(pilot, command)
            if command == "/resume":  # a picker of the saved sessions: Esc closes it
                await until(pilot, lambda: app.screen is not app.screen_stack[0], what="the picker")
                await pilot.press("escape")
        await pilot.press("shift+tab")
        await pilot.pause(0.1)
        assert session.mode == "full-auto" and "Unknown command /nonsense" in screen_text(app)
        await send(pilot, "Try again.")
        await until(pilot, lambda: session.last_status == "empty_submission" and not session.busy,
                    what="the retry (a bare submit: it changed nothing)")
        await quit_app(pilot, session)


@sync
async def test_ctrl_c_in_a_dialog_denies_and_interrupts(make_repo, tmp_path):
    repo = make_repo(FILES)
    app, session, model = make_app(repo, tmp_path, [call("bash", command="rm -rf /testbed"), call("submit")])
    async with app.run_test(size=(80, 24)) as pilot:
        await type_line(pilot, "clean up")
        await approve(pilot, "ctrl+c", title="Run this command?")
        await until(pilot, lambda: session.last_status == "interrupted" and not session.busy, what="the interrupt")
        assert len(model.calls) == 1 and session.sandbox.read_file("calc.py")  # nothing ran
        await send(pilot, "/clear")
        await until(pilot, lambda: session.sandbox_state == "none" and not session.busy, what="/clear")
        await pilot.pause(0.1)
        assert "Cleared" in screen_text(app) and session.task is None
        await quit_app(pilot, session)


@sync
async def test_candidates_diff_apply_and_follow_ups_are_the_selected_ones(make_repo, tmp_path):
    repo = make_repo(FILES)
    target = make_repo(FILES, name="checkout")
    model = BySeed({0: [call("bash", command="ls"), call("submit")],  # live, but no patch: not usable
                    1: [fix_add(), call("submit")],  # the one selected
                    None: [call("bash", command="awk 1 calc.py"), call("submit")]})  # the follow-up
    config = Config(agent={"localize": False}, trajectories_dir=str(tmp_path / "t"), scaling={"candidates": 2, "max_parallel": 1, "seeds": [0, 1],
                                                        "verifiers": [], "policy": "vote"})
    session = Session(config, model, repo=str(repo), mode="full-auto", store=TrajectoryStore(tmp_path / "t"))
    app = CodeagentApp(session)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_line(pilot, "add() subtracts")
        await until(pilot, lambda: session.trajectory_id and not session.busy, timeout=120, what="the candidates")
        await pilot.pause(0.2)
        selected = app.candidates.candidates[session.trajectory_id]
        assert selected.selected and selected.index == 1
        assert "+    return a + b" in session.patch and app.diff.patch == session.patch  # shown is what /apply applies
        shown = screen_text(app)
        assert "Selected candidate 1 " in shown, shown
        assert "applied" not in str(app.diff._header.render())  # not yet: nothing said
        await send(pilot, f"/apply {target}")
        await until(pilot, lambda: not session.busy, what="/apply")
        assert (target / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
        await pilot.pause(0.1)  # the diff panel says the patch is in the files now
        assert f"applied to {target} (already in your files)" in str(app.diff._header.render())
        await send(pilot, "Show me the file.")  # continues the selected run: its steps are shown
        await until(pilot, lambda: "$ awk 1 calc.py" in screen_text(app) and not session.busy, what="the follow-up")
        assert session.trajectory_id == selected.run_id
        assert {"role": "user", "content": "Show me the file."} in model.calls[0]
        await quit_app(pilot, session)


@sync
async def test_a_link_in_the_models_text_opens_only_http_and_only_after_the_url_is_shown(make_repo, tmp_path):
    """Real clicks on links in the model's Markdown: smb: or vscode: (a scheme handler on the host) is never
    opened (a notice names it);
    an https one shows its URL first and opens only on [o]."""
    from textual.widgets import Markdown

    from codeagent.tui.link_screen import LinkScreen

    repo = make_repo(FILES)
    text = "[ab](smb://evil.example/share) [cd](vscode://file/etc/passwd) [ef](https://example.com/x?y=1)"
    app, session, _ = make_app(repo, tmp_path, [call("submit", text)])
    opened: list[str] = []
    app.open_url = lambda url, **_: opened.append(url)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_line(pilot, "read the docs")
        await until(pilot, lambda: session.last_status == "empty_submission" and not session.busy, what="the run")
        paragraph = app.transcript.query_one(Markdown).query_one("MarkdownParagraph")
        for column in (0, 3):  # "ab", "cd"
            await pilot.click(paragraph, offset=(column, 0))
            await pilot.pause(0.1)
        assert opened == [] and not isinstance(app.screen, LinkScreen)
        shown = screen_text(app)
        assert "Not opened: smb://evil.example/share" in shown and "Not opened: vscode://file/etc/passwd" in shown
        await pilot.click(paragraph, offset=(6, 0))  # "ef"
        await until(pilot, lambda: isinstance(app.screen, LinkScreen), what="the link dialog")
        await pilot.pause(0.05)
        assert "https://example.com/x?y=1" in screen_text(app) and opened == []
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, LinkScreen), what="the dialog to close")
        assert opened == []
        await pilot.click(paragraph, offset=(6, 0))
        await until(pilot, lambda: isinstance(app.screen, LinkScreen), what="the link dialog")
        await pilot.press("o")
        await until(pilot, lambda: opened == ["https://example.com/x?y=1"], what="the link to open")
        await quit_app(pilot, session)
