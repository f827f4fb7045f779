"""The input box's keys and the slash-command parser (no sandbox)."""

from __future__ import annotations

from textual.app import App

from codeagent.run.session.slash import parse, resolve
from codeagent.tui.prompt import PromptInput
from tests.support.tui import sync


class PromptApp(App):
    def __init__(self):
        super().__init__()
        self.sent: list[str] = []

    def compose(self):
        yield PromptInput()

    def on_prompt_input_submitted(self, message: PromptInput.Submitted) -> None:
        self.sent.append(message.text)


@sync
async def test_enter_sends_ctrl_j_and_backslash_make_new_lines_up_recalls():
    app = PromptApp()
    async with app.run_test(size=(80, 24)) as pilot:
        prompt = app.query_one(PromptInput)
        await pilot.press(*"line one", "ctrl+j", *"line two\\", "enter", *"three", "enter")
        await pilot.pause()
        assert app.sent == ["line one\nline two\nthree"] and prompt.text == ""
        await pilot.press("up")
        assert prompt.text == "line one\nline two\nthree"
        await pilot.press("end", "x", "enter")  # an edited recall is a new message
        await pilot.pause()
        assert app.sent[-1] == "line one\nline two\nthreex"
        await pilot.press("enter")  # an empty box sends nothing
        await pilot.pause()
        assert len(app.sent) == 2


def test_slash_commands_parse_and_resolve_prefixes():
    assert parse("/apply  /tmp/x ").argument == "/tmp/x" and parse("/UNDO").name == "undo"
    assert parse("fix /etc/hosts handling") is None and parse("//not a command") is None
    assert resolve("q") == "quit" and resolve("c") is None and resolve("cand") == "candidates"
