"""Issue 15's interactive features, driven through the TUI with the pilot and the scripted model in a
real Docker sandbox: plain answers end the turn, plan mode, /init, @path mentions, images."""

from __future__ import annotations

import functools
import json
import os

import pytest
from click.testing import CliRunner

from codeagent.models import ModelResponse, ScriptedModel, ToolCall
from tests.support import tui
from tests.support.images import PNG
from tests.support.scripted import FILES, answer, call, fix_add
from tests.support.tui import approve, quit_app, screen_text, send, sync, until

pytestmark = pytest.mark.usefixtures("no_leaks")


class Recording(ScriptedModel):
    """Also records the tool names each request offered."""

    def __init__(self, turns):
        super().__init__(turns)
        self.offered: list[list[str]] = []

    def complete(self, messages, tools, sampling):
        self.offered.append([tool["function"]["name"] for tool in tools])
        return super().complete(messages, tools, sampling)


make_app = functools.partial(tui.make_app, mode="full-auto", model_class=Recording)


@sync
async def test_a_plain_answer_ends_the_turn_and_the_next_message_continues(make_repo, tmp_path):
    repo = make_repo(FILES)
    app, session, model = make_app(repo, tmp_path, [answer("add() subtracts: `a - b` should be `a + b`."),
                                                    fix_add(), call("submit")])
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, "Why is add() wrong? Explain, don't change anything.")
        await until(pilot, lambda: session.last_status == "answered" and not session.busy, what="the answer")
        await pilot.pause(0.1)
        shown = screen_text(app)
        assert "a - b` should be" in shown or "a - b should be" in shown
        assert "answered" in shown and "format" not in shown.lower()
        assert len(model.calls) == 1  # the turn ended: nothing more was asked of the model
        await send(pilot, "Now fix it.")
        await until(pilot, lambda: session.last_status == "submitted" and not session.busy, what="the fix")
        assert model.calls[1][-1] == {"role": "user", "content": "Now fix it."}
        assert model.calls[1][2]["content"].startswith("add() subtracts")  # the same conversation
        assert "+    return a + b" in app.diff.patch
        trajectory = session.store.load(session.trajectory_id)
        assert [step.format_error for step in trajectory.steps] == [None, None, None]
        assert "A user follows this session" in trajectory.messages[0]["content"]
        await quit_app(pilot, session)


@sync
async def test_plan_mode_offers_read_only_tools_refuses_a_write_and_switching_back_continues(make_repo, tmp_path):
    repo = make_repo(FILES)
    # a symlink out of the repository is refused in test_mentions_images_modes.py: the Docker sandbox cannot
    # even be opened on such a repository (its archive upload rejects the link), so here the `..` path is
    sneaky = ModelResponse(content="", tool_calls=[ToolCall(id="c1", name="bash", arguments={"command": "rm calc.py"},
                                                            raw_arguments='{"command": "rm calc.py"}')])
    turns = [sneaky, call("bash", command="ls && git status --short"), call("search", command="grep", pattern="def add"),
             answer("Plan: change `-` to `+` in add()."), fix_add(), call("submit")]
    app, session, model = make_app(repo, tmp_path, turns, mode="suggest")  # a read-only command is not asked about
    async with app.run_test(size=(120, 30)) as pilot:
        await send(pilot, "/plan")
        await pilot.pause(0.1)
        assert session.agent.mode == "plan" and "PLAN" in screen_text(app)
        await send(pilot, "How would you fix @calc.py? Also see @../secret.txt")
        await until(pilot, lambda: session.last_status == "answered" and not session.busy, what="the plan")
        await pilot.pause(0.1)
        shown = screen_text(app)
        assert "@../secret.txt: refused: a path with `..`" in shown
        first = model.calls[0]
        assert "[plan mode]" in first[0]["content"] or "[plan mode]" in first[-1]["content"]
        assert '<file path="calc.py">\ndef add(a, b):\n    return a - b\n</file>' in first[1]["content"]
        for offered in model.offered:
            assert "submit" not in offered and "search" in offered and "bash" in offered
        refused = next(m for m in model.calls[1] if m.get("role") == "tool")
        assert "Not run: plan mode is on" in refused["content"] and "`rm` is not a read-only command" in refused["content"]
        listed = next(m for m in model.calls[2] if m.get("role") == "tool" and m["tool_call_id"] != "c1")
        assert "calc.py" in listed["content"] and "Not run" not in listed["content"]
        assert session.sandbox.read_file("calc.py")  # the refused rm did not run
        assert session.patch == ""

        await pilot.press("ctrl+t")  # plan mode off: the same conversation goes on, with every tool
        await pilot.pause(0.1)
        assert session.agent.mode == "normal" and "PLAN" not in screen_text(app).splitlines()[-1]
        await send(pilot, "Do it.")
        await approve(pilot, "y", title="calc.py")  # out of plan mode, suggest asks before an edit again
        await until(pilot, lambda: session.last_status == "submitted" and not session.busy, what="the change")
        assert "submit" in model.offered[4] and "editor" in model.offered[4]
        told = [m["content"] for m in model.calls[4] if m.get("role") == "user"]
        assert told[-2].startswith("[normal mode]") and told[-1] == "Do it."
        assert model.calls[4][:len(model.calls[3])] == model.calls[3]  # continued, not restarted
        assert "+    return a + b" in app.diff.patch
        await quit_app(pilot, session)


@sync
async def test_init_writes_agents_md_into_the_diff_with_approval(make_repo, tmp_path):
    repo = make_repo(FILES)
    turns = [call("editor", command="create", path="AGENTS.md", file_text="# calc\nRun `python -m pytest`.\n"),
             call("submit")]
    app, session, model = make_app(repo, tmp_path, turns, mode="suggest")
    async with app.run_test(size=(120, 30)) as pilot:
        await send(pilot, "/init")
        await approve(pilot, "y", title="AGENTS.md")
        await until(pilot, lambda: session.last_status == "submitted" and not session.busy, what="/init")
        assert "Write a first AGENTS.md" in model.calls[0][1]["content"]
        assert "+++ b/AGENTS.md" in app.diff.patch and "+Run `python -m pytest`." in app.diff.patch
        assert not (repo / "AGENTS.md").exists()  # applied only with /apply, like any change
        await quit_app(pilot, session)


@sync
async def test_a_pasted_image_path_reaches_the_request_and_the_trajectory_keeps_its_hash(make_repo, tmp_path):
    repo = make_repo(FILES)
    shot = tmp_path / "screen shot.png"
    shot.write_bytes(PNG)
    (tmp_path / "fake.png").write_text("text")
    app, session, model = make_app(repo, tmp_path, [answer("I see a tiny image.")])
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, f"What is in {tmp_path}/fake.png?")
        await pilot.pause(0.1)
        shown = " ".join(screen_text(app).split())
        assert "Not sent: " in shown and "fake.png: not a PNG, JPEG, GIF or WebP image" in shown
        assert session.task is None
        await send(pilot, f"What is in '{shot}'?")
        await until(pilot, lambda: session.last_status == "answered" and not session.busy, what="the answer")
        parts = model.calls[0][1]["content"]
        assert parts[0]["type"] == "text" and parts[1]["type"] == "image_url"
        assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
        saved = (session.store.root / f"{session.trajectory_id}.jsonl").read_text()
        assert "data:image/png;base64" not in saved and f"image/png {len(PNG)} bytes]" in saved
        await quit_app(pilot, session)


def test_image_flag_reaches_the_request_as_an_image_part(make_repo, tmp_path, monkeypatch):
    from codeagent import cli
    from codeagent.run import solve_request as solve  # where every front end takes the model from

    repo = make_repo(FILES)
    picture = tmp_path / "bug.png"
    picture.write_bytes(PNG)
    model = ScriptedModel([call("submit")])
    monkeypatch.setattr(solve, "resolve_model", lambda config, example: (model, False))
    monkeypatch.setenv("CODEAGENT_TRAJECTORY_DIR", str(tmp_path / "trajs"))
    monkeypatch.setenv("CODEAGENT_CONFIG", str(tmp_path / "none.yaml"))
    runner = CliRunner()
    result = runner.invoke(cli.cli, ["solve", "--repo", str(repo), "--issue", "The button looks wrong.",
                                     "--image", str(picture), "--headless", "--json", "--set", "agent.localize=false"])
    assert result.exit_code == 6, result.output  # a bare submit: an empty submission
    text, image = model.calls[0][1]["content"]
    assert "The button looks wrong." in text["text"] and image["image_url"]["url"].startswith("data:image/png;base64,")
    (tmp_path / "notes.png").write_text("notes")
    result = runner.invoke(cli.cli, ["solve", "--repo", str(repo), "--issue", "x", "--image",
                                     str(tmp_path / "notes.png"), "--headless"])
    assert result.exit_code == 2 and "error: --image: " in result.output
    assert "notes.png: not a PNG, JPEG, GIF or WebP image" in result.output


def test_a_model_without_vision_is_refused_before_the_run(make_repo, tmp_path):
    import subprocess
    import sys

    repo = make_repo(FILES)
    picture = tmp_path / "bug.png"
    picture.write_bytes(PNG)
    env = {**os.environ, "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "t"), "CODEAGENT_CONFIG": str(tmp_path / "n.yaml")}
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "solve", "--repo", str(repo), "--issue", "x",
                           "--model", "gpt-3.5-turbo", "--image", str(picture), "--headless"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2 and "does not accept images" in proc.stderr, proc.stderr
    assert proc.stderr.startswith("error: --image: the model gpt-3.5-turbo does not accept images")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_headless_plan_mode_ends_with_the_answer(make_repo, tmp_path, monkeypatch):
    from codeagent import cli
    from codeagent.run import solve_request as solve  # where every front end takes the model from

    repo = make_repo(FILES)
    model = Recording([call("search", command="grep", pattern="def add"), answer("add() subtracts.")])
    monkeypatch.setattr(solve, "resolve_model", lambda config, example: (model, False))
    monkeypatch.setenv("CODEAGENT_TRAJECTORY_DIR", str(tmp_path / "trajs"))
    monkeypatch.setenv("CODEAGENT_CONFIG", str(tmp_path / "none.yaml"))
    result = CliRunner().invoke(cli.cli, ["solve", "--repo", str(repo), "--issue", "Why is add wrong?", "--mode",
                                          "plan", "--headless", "--json", "--set", "agent.localize=false"])
    assert result.exit_code == 0, result.output
    finished = [json.loads(line) for line in result.output.splitlines() if '"finished"' in line][-1]
    assert finished["exit_status"] == "answered"
    assert all("submit" not in offered and "bash" in offered for offered in model.offered)


@sync
async def test_at_completes_repository_paths_in_the_input(make_repo, tmp_path):
    repo = make_repo({**FILES, "pkg/tools/strings.py": "x = 1\n"})
    app, session, _ = make_app(repo, tmp_path, [])
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press(*"see @p")
        assert app.prompt.suggestion == "kg/"  # one folder at a time, from the git tree
        await pilot.press("tab")
        assert app.prompt.text == "see @pkg/" and app.prompt.has_focus and app.prompt.suggestion == "tools/"
        await pilot.press("tab")
        assert app.prompt.text == "see @pkg/tools/"
        assert app.prompt.suggestion == "strings.py"
        await pilot.press("right")  # Right takes it too (Textual's own suggestion key)
        assert app.prompt.text == "see @pkg/tools/strings.py"
        await pilot.press(" ", *"@zz")
        assert app.prompt.suggestion == ""
        await quit_app(pilot, session)
