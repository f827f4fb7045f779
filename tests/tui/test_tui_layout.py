"""The TUI at the sizes people use (80, 120, 200 columns) and after a resize, fed with a fixed event
stream through the session (no model, no sandbox): typing after Tab, tool lines, scrolling, the
status bar."""

from __future__ import annotations

from codeagent.events import ModelOutput, Observed, RunStarted, StepStarted, ToolCalled
from tests.support.tui import a_run, feed, screen_text, settle, sync
from tests.support.tui import screen_app as make_app

LONG = ("python -m pytest -q tests/test_cart.py::TestRemove::test_removing_every_unit_deletes_the_line "
        "-k 'remove and not slow' --maxfail=1")


def a_long_command(session, call_id: str = "long", seconds: float = 12.34) -> None:
    feed(session, ToolCalled(step=3, call_id=call_id, tool="bash", arguments={"command": LONG}),
         Observed(step=3, call_id=call_id, tool="bash", output="1 passed", exit_code=0, seconds=seconds))


def line_with(app, needle: str) -> str:
    return next(line for line in screen_text(app).splitlines() if needle in line)


@sync
async def test_typing_after_tab_goes_to_the_input():
    app, session = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        a_run(session)
        await settle(pilot)
        while type(app.focused).__name__ != "CollapsibleTitle":  # the transcript first, then a tool call
            await pilot.press("tab")
        await pilot.press("x")  # the transcript or a tool call had the focus: the key goes to the input
        assert app.focused is app.prompt and app.prompt.text == "x"
        app.prompt.clear()
        while type(app.focused).__name__ != "CollapsibleTitle":
            await pilot.press("tab")
        await pilot.press("enter")  # Enter still expands the tool call
        await pilot.press(*"/help", "enter")
        await settle(pilot)
        assert app.focused is app.prompt and app.prompt.text == ""
        shown = screen_text(app)
        assert "/quit" in shown and "typing goes to the input" in shown


@sync
async def test_tool_lines_use_the_width_and_keep_their_timing():
    for width in (80, 200):
        app, session = make_app()
        async with app.run_test(size=(width, 30)) as pilot:
            feed(session, RunStarted(task_id="shop-1", model="openai/gpt-4o", sandbox="docker"))
            a_long_command(session)
            await settle(pilot)
            line = line_with(app, "▶ $ python -m pytest -q tests/test_cart")
            assert line.rstrip().endswith("exit 0 · 12.34s"), line  # the timing is never cut
            if width == 200:
                assert "--maxfail=1 · exit 0" in line, line  # fits whole
            else:
                assert "…" in line and len(line.rstrip()) >= 75, line  # cut to the width, not to 64 characters
            await pilot.resize_terminal(200 if width == 80 else 80, 30)  # the line follows the new width
            await settle(pilot)
            line = line_with(app, "▶ $ python -m pytest -q tests/test_cart")
            assert line.rstrip().endswith("exit 0 · 12.34s") and ("--maxfail=1" in line) == (width == 80), line


@sync
async def test_a_resize_keeps_the_view_at_the_bottom():
    app, session = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        a_run(session)
        for index in range(30):
            a_long_command(session, f"more{index}", seconds=index)
        await settle(pilot)
        transcript = app.transcript
        assert transcript.max_scroll_y > 0 and transcript.scroll_y == transcript.max_scroll_y
        for width, height in ((200, 50), (60, 20), (120, 34), (80, 24)):
            await pilot.resize_terminal(width, height)
            await settle(pilot)
            assert transcript.scroll_y == transcript.max_scroll_y, (width, height)
            assert "29.00s" in screen_text(app), (width, height)  # the last tool call is in view
        feed(session, StepStarted(step=9))
        a_long_command(session, "last", seconds=99)
        await settle(pilot)
        assert "99.00s" in screen_text(app)


@sync
async def test_the_status_bar_keeps_its_essentials_with_a_long_model_name():
    model = "openrouter/anthropic/claude-sonnet-4-20250514-thinking-extended-preview"
    for width in (80, 120, 200):
        app, session = make_app(model)
        async with app.run_test(size=(width, 24)) as pilot:
            feed(session, RunStarted(task_id="shop-1", model=model, sandbox="docker"), StepStarted(step=11),
                 ModelOutput(step=11, text="", prompt_tokens=123_456, completion_tokens=789, cost=12.3456))
            session.set_mode("auto-edit")
            session.slot.set_state("starting")
            session.worker.busy = True  # as while the agent works: the spinner and "working"
            await settle(pilot)
            line = screen_text(app).splitlines()[-1].rstrip()
            session.worker.busy = False
            for essential in ("step 12", "124.2k tok", "$12.3456", "sandbox starting", "auto-edit"):
                assert essential in line, (width, line)
            assert line.endswith("auto-edit") or "ctrl+c stop" in line, (width, line)  # nothing cut at the end
            assert "eview" in line, (width, line)  # the model's name elided in its middle: its end is kept
            assert ("openrouter/anthropic/" in line) == (width == 200), (width, line)
            assert (" │ " in line) == (width >= 120) and ("/help" in line) == (width == 200), (width, line)
