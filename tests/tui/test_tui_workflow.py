"""The daily loop in the TUI (issue 24, items 9 and 10), through Textual's pilot with the scripted
model in a real Docker sandbox: what the status bar says while an approval waits, the bell, denied
calls, the header after a mode switch, the command and file popups, the session picker, /compact
and the context meter, steering best-of-N."""

from __future__ import annotations

import threading

import pytest

from codeagent.config import Config
from codeagent.run.session import Session
from codeagent.trajectory.store import TrajectoryStore
from codeagent.tui.app import CodeagentApp
from codeagent.tui.approval_screen import ApprovalScreen
from tests.support.scripted import FILES, BySeed, call, fix_add
from tests.support.tui import approve, make_app, quit_app, screen_text, send, sync, type_line, until

pytestmark = pytest.mark.usefixtures("no_leaks")


def status_text(app) -> str:
    return str(app.status_bar.render())


@sync
async def test_the_header_follows_the_approval_mode(make_repo, tmp_path):
    app, session, _ = make_app(make_repo(FILES), tmp_path, [])
    async with app.run_test(size=(120, 30)) as pilot:
        assert "· suggest mode" in screen_text(app)
        await pilot.press("shift+tab")
        await pilot.pause(0.1)
        shown = screen_text(app)
        assert "· auto-edit mode" in shown and "suggest mode" not in shown, shown
        await send(pilot, "/mode full-auto")
        await pilot.pause(0.1)
        assert "· full-auto mode" in screen_text(app)
        await quit_app(pilot, session)


@sync
async def test_an_approval_says_waiting_for_you_and_rings_as_does_the_end_of_a_run(make_repo, tmp_path):
    app, session, _ = make_app(make_repo(FILES), tmp_path, [fix_add(), call("submit")])
    rings, notified = [], []
    app.bell = lambda: rings.append(len(rings))
    notify = app.notify
    app.notify = lambda text, **options: (notified.append(text), notify(text, **options))
    async with app.run_test(size=(120, 30)) as pilot:
        await type_line(pilot, "add() subtracts")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the dialog")
        await pilot.pause(0.1)
        assert "waiting for you" in status_text(app) and "working" not in status_text(app)
        assert rings == [0], "one bell for the approval"
        assert notified == ["Waiting for you: Edit calc.py?"]
        await approve(pilot, "y", title="Edit calc.py?")
        await until(pilot, lambda: session.last_status == "submitted" and not session.busy, what="the run")
        await pilot.pause(0.1)
        assert rings == [0, 1], "one more at the end of the run"
        assert notified[-1] == "The run ended: submitted."
        assert "waiting for you" not in status_text(app) and "idle" in status_text(app)
        await quit_app(pilot, session)


@sync
async def test_a_denied_call_shows_as_denied_not_as_an_error(make_repo, tmp_path):
    app, session, _ = make_app(make_repo(FILES), tmp_path, [call("bash", command="rm README.md"), call("submit")])
    async with app.run_test(size=(120, 30)) as pilot:
        await type_line(pilot, "add() subtracts")
        await approve(pilot, "n", "enter", title="Run this command?")
        await until(pilot, lambda: session.last_status == "empty_submission" and not session.busy, what="the run")
        await pilot.pause(0.1)
        block = next(b for b in app.transcript.blocks.values() if b.summary == "$ rm README.md")
        assert block._status == ("denied", "bold magenta")  # its own style: not an error in red
        assert "$ rm README.md · denied" in screen_text(app)
        await quit_app(pilot, session)


@sync
async def test_slash_and_at_open_a_filtering_popup(make_repo, tmp_path):
    repo = make_repo({**FILES, "pkg/tools/strings.py": "x = 1\n", "pkg/tools/numbers.py": "y = 2\n"})
    app, session, _ = make_app(repo, tmp_path, [])
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("/")
        await pilot.pause(0.05)
        shown = screen_text(app)
        assert app.menu.shown and "/model [NAME]" in shown and "/plan" in shown  # scrolls to the rest
        assert {"/quit", "/compact", "/candidates"} <= {entry.value.strip() for entry in app.menu.entries}
        await pilot.press("m", "o")
        await pilot.pause(0.05)
        assert [entry.value.strip() for entry in app.menu.entries] == ["/model", "/mode"]
        assert "/diff" not in screen_text(app)
        await pilot.press("down", "tab")  # arrows move, Tab takes: the argument comes next
        assert app.prompt.text == "/mode " and not app.menu.shown
        await pilot.press(*"full-auto", "enter")
        await until(pilot, lambda: session.mode == "full-auto", what="/mode full-auto")
        await pilot.press(*"/he", "enter")  # Enter takes /help, which has no argument: it runs
        await until(pilot, lambda: "have the agent write a first AGENTS.md" in screen_text(app), what="/help")
        assert app.prompt.text == ""

        await pilot.press(*"see @")
        await pilot.pause(0.05)
        assert [entry.label for entry in app.menu.entries] == ["README.md", "calc.py", "pkg/"]
        await pilot.press(*"str")  # anywhere in the path
        await pilot.pause(0.05)
        assert [entry.label for entry in app.menu.entries] == ["pkg/tools/strings.py"]
        await pilot.press("backspace", "backspace", "backspace", *"pkg/tools/")
        await pilot.pause(0.05)
        assert [entry.label for entry in app.menu.entries] == ["pkg/tools/numbers.py", "pkg/tools/strings.py"]
        assert "pkg/tools/numbers.py" in screen_text(app)
        await pilot.press("down", "enter")  # Enter takes the entry, it does not send
        assert app.prompt.text == "see @pkg/tools/strings.py" and not app.menu.shown
        await pilot.press(" ", "@", "c", "escape")
        assert not app.menu.shown and app.prompt.text == "see @pkg/tools/strings.py @c"
        await quit_app(pilot, session)


@sync
async def test_compact_summarizes_in_one_call_keeps_task_and_patch_and_the_meter_drops(make_repo, tmp_path):
    repo = make_repo(FILES)
    long_look = call("bash", command="awk 1 calc.py; seq 1 3000")  # a big observation fills the context
    turns = [long_look, fix_add(), call("submit"), {"role": "assistant", "content": "SUMMARY: add() fixed in calc.py"},
             call("bash", command="awk 1 calc.py"), call("submit")]
    app, session, model = make_app(repo, tmp_path, turns, mode="full-auto")
    async with app.run_test(size=(200, 30)) as pilot:
        await type_line(pilot, "add() subtracts")
        await until(pilot, lambda: session.last_status == "submitted" and not session.busy, what="the run")
        await pilot.pause(0.1)
        limit = session.config.model.context_tokens
        before = session.state.stats.context
        assert before > 3000 // 4 and f"ctx {before / 1000:.1f}k/{limit / 1000:g}k" in status_text(app)
        await send(pilot, "/compact")
        await until(pilot, lambda: "Compacted the conversation" in screen_text(app) and not session.busy, what="/compact")
        assert len(model.calls) == 4  # one call for the summary
        summary_request = model.calls[3]
        assert "compact this conversation" in summary_request[-1]["content"]
        assert any("2999" in str(message.get("content")) for message in summary_request)  # it saw the conversation
        assert session.state.stats.context < before
        await pilot.pause(0.1)
        assert f"ctx {session.state.stats.context / 1000:.1f}k" in status_text(app) or \
            f"ctx {session.state.stats.context}/" in status_text(app)

        await send(pilot, "Show me the file.")
        await until(pilot, lambda: len(model.calls) == 6 and not session.busy, what="the follow-up")
        sent = model.calls[4]
        assert sent[0]["role"] == "system" and sent[0] == summary_request[0]  # the system prompt: instructions kept
        assert "add() subtracts" in sent[1]["content"]  # the task
        assert "SUMMARY: add() fixed in calc.py" in sent[2]["content"] and "+    return a + b" in sent[2]["content"]
        assert sent[3] == {"role": "user", "content": "Show me the file."}
        assert not any("2999" in str(message.get("content")) for message in sent)  # the old observation is gone
        trajectory = session.store.load(session.trajectory_id)
        assert any("2999" in str(message.get("content")) for message in trajectory.messages)  # the record keeps all
        await quit_app(pilot, session)


@sync
async def test_resume_opens_a_session_picker_chosen_with_the_arrows(make_repo, tmp_path):
    repo = make_repo(FILES)
    turns = [fix_add(), call("submit"), {"role": "assistant", "content": "It is calc.py."}]
    app, session, _ = make_app(repo, tmp_path, turns, mode="full-auto")
    async with app.run_test(size=(120, 30)) as pilot:
        await type_line(pilot, "add() subtracts")
        await until(pilot, lambda: session.last_status == "submitted" and not session.busy, what="the first run")
        first = session.trajectory_id
        await send(pilot, "/clear")
        await until(pilot, lambda: session.task is None and not session.busy, what="/clear")
        await type_line(pilot, "Where is add defined?")
        await until(pilot, lambda: session.last_status == "answered" and not session.busy, what="the second run")
        second = session.trajectory_id
        await send(pilot, "/clear")
        await until(pilot, lambda: session.task is None and not session.busy, what="/clear")

        await send(pilot, "/resume")
        await until(pilot, lambda: type(app.screen).__name__ == "PickScreen", what="the picker")
        await pilot.pause(0.1)
        shown = screen_text(app)
        lines = [line for line in shown.splitlines() if "add" in line and ("answered" in line or "submitted" in line)]
        assert len(lines) == 2, shown  # newest first: date, steps, status, title
        assert "1  answered" in lines[0] and "Where is add defined?" in lines[0]
        assert "2  submitted" in lines[1] and "add() subtracts" in lines[1]
        assert "started" in shown and "steps" in shown and "status" in shown
        await pilot.press("down", "enter")
        await until(pilot, lambda: session.trajectory_id == first and session.sandbox_state == "ready"
                    and not session.busy, what="the resume")
        assert session.trajectory_id != second and "+    return a + b" in session.patch
        await send(pilot, "/resume")
        await until(pilot, lambda: type(app.screen).__name__ == "PickScreen", what="the picker")
        await pilot.press("escape")  # closes it; nothing changes
        await until(pilot, lambda: type(app.screen).__name__ != "PickScreen", what="the picker to close")
        assert session.trajectory_id == first
        await quit_app(pilot, session)


@sync
async def test_candidates_show_progress_open_each_patch_and_pick_one(make_repo, tmp_path):
    repo = make_repo(FILES)
    target = make_repo(FILES, name="checkout")
    release = threading.Event()

    def held(messages):  # candidate 1 waits in its second step until the test has seen the progress lines
        release.wait(60)
        return call("submit")

    swap = call("editor", command="str_replace", path="calc.py", old_str="a - b", new_str="b + a")
    model = BySeed({0: [fix_add(), call("submit")], 1: [swap, held]})
    config = Config(agent={"localize": False}, trajectories_dir=str(tmp_path / "t"),
                    scaling={"candidates": 2, "max_parallel": 2, "seeds": [0, 1], "verifiers": [], "policy": "vote"})
    session = Session(config, model, repo=str(repo), mode="full-auto", store=TrajectoryStore(tmp_path / "t"))
    app = CodeagentApp(session)
    async with app.run_test(size=(120, 34)) as pilot:
        await type_line(pilot, "add() subtracts")
        await until(pilot, lambda: "candidate 0 · done: submitted · 2 steps" in screen_text(app)
                    and "candidate 1 · running step 2" in screen_text(app), timeout=120, what="the progress lines")
        release.set()
        await until(pilot, lambda: session.trajectory_id and not session.busy, timeout=120, what="the selection")
        await pilot.pause(0.2)
        shown = screen_text(app)
        assert "candidate 0 · scored: submitted · 2 steps  ← selected" in shown, shown
        assert "candidate 1 · scored: submitted · 2 steps" in shown
        assert "ties with candidate 1 on votes, similarity and was sampled first" in shown  # the tie-break, named
        assert "+    return a + b" in session.patch

        await send(pilot, "/candidates")
        await until(pilot, lambda: type(app.screen).__name__ == "PickScreen", what="the candidates picker")
        await pilot.press("down", "enter")  # candidate 1's patch
        await until(pilot, lambda: type(app.screen).__name__ == "PatchScreen", what="the patch")
        await pilot.pause(0.1)
        shown = screen_text(app)
        assert "Candidate 1's patch" in shown and "+    return b + a" in shown and "a + b" not in shown
        await pilot.press("escape")  # back to the list of candidates
        await until(pilot, lambda: type(app.screen).__name__ == "PickScreen", what="the picker again")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.screen_stack[0], what="the conversation")

        await send(pilot, "/candidates pick 1")
        await until(pilot, lambda: "b + a" in session.patch and not session.busy, what="the pick")
        await pilot.pause(0.2)
        assert app.diff.patch == session.patch
        assert session.trajectory_id == next(r for r, c in app.candidates.candidates.items() if c.index == 1)
        shown = screen_text(app)
        assert "candidate 1 · scored: submitted · 2 steps  ← selected" in shown and "picked by you" in shown
        await send(pilot, f"/apply {target}")
        await until(pilot, lambda: not session.busy, what="/apply")
        assert (target / "calc.py").read_text() == "def add(a, b):\n    return b + a\n"
        await send(pilot, "/candidates pick 7")
        await until(pilot, lambda: "no such candidate" in screen_text(app), what="the refusal")
        await quit_app(pilot, session)
