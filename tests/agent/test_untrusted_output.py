"""What the model and its commands print reaches the user's terminal shown, never obeyed."""

from __future__ import annotations

import io
import json

import pytest
from click.testing import CliRunner

from codeagent.agent.loop import Agent
from codeagent.cli.traj_commands import traj
from codeagent.config import Config
from codeagent.events import EventBus
from codeagent.models import ScriptedModel
from codeagent.run.printers import JsonPrinter, ProgressPrinter
from codeagent.sandbox import open_sandbox
from codeagent.task import Task
from codeagent.trajectory.store import TrajectoryStore
from codeagent.visible import visible
from tests.support.git import git
from tests.support.scripted import call

ATTACK = r"printf '\033]0;pwned\007\033[2J[bold]x[/]\302\233\n'"  # retitle, clear the screen, markup, C1 CSI


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory, base_image):
    """One real run whose bash command prints escape sequences; what each printer printed, and the store."""
    root = tmp_path_factory.mktemp("hostile")
    (root / "repo").mkdir()
    (root / "repo" / "a.txt").write_text("a\n")
    git(root / "repo", "init", "-q")
    git(root / "repo", "add", "-A")
    git(root / "repo", "commit", "-q", "-m", "initial")
    progress, lines = io.StringIO(), io.StringIO()
    events = EventBus(ProgressPrinter(stream=progress), JsonPrinter(stream=lines))
    store = TrajectoryStore(root / "trajs")
    model = ScriptedModel([call("bash", "\x1b[31mthinking\x1b[0m", command=ATTACK + "; echo '\x1b]52;c;aGk=\x07'"),
                           call("submit")])
    agent = Agent(model, Config(agent={"localize": False}), events=events, store=store)
    with open_sandbox(root / "repo") as sandbox:
        result = agent.run(Task(repo=str(root / "repo"), problem_statement="x"), sandbox)
    return progress.getvalue(), lines.getvalue(), store, result


def test_visible_keeps_newlines_and_tabs_and_shows_the_rest():
    assert visible("a\tb\r\nc") == "a\tb\nc"
    assert visible("\x1b]0;pwned\x07\x1b[2J\x00\x7f\x9b\u202e") == "^[]0;pwned^G^[[2J^@^?\\x9b\\u202e"
    assert visible(b"caf\xe9".decode("utf-8", "surrogateescape")) == "caf\\udce9"


def test_headless_output_has_no_raw_escape(hostile_run):
    progress, _, _, result = hostile_run
    assert result.exit_status == "submitted"
    assert "^[]0;pwned^G^[[2J[bold]x[/]\\x9b" in progress  # shown, markup included, as it was printed
    assert "^[[31mthinking^[[0m" in progress
    assert "\x1b" not in progress and "\x07" not in progress and "\x9b" not in progress


def test_json_output_stays_exact(hostile_run):
    _, lines, _, _ = hostile_run
    observations = [event for event in map(json.loads, lines.splitlines()) if event["kind"] == "observation"]
    assert "\x1b]0;pwned\x07\x1b[2J[bold]x[/]\x9b\n" in observations[0]["output"]
    assert "\x1b" not in lines  # json.dumps escapes control characters: \u001b


def test_traj_show_and_ls_show_escapes_not_obey_them(hostile_run):
    _, _, store, result = hostile_run
    shown = CliRunner().invoke(traj, ["--store", str(store.root), "show", result.trajectory_id])
    assert shown.exit_code == 0, shown.output
    assert "^[]0;pwned^G^[[2J[bold]x[/]" in shown.output and "\x1b" not in shown.output
    listed = CliRunner().invoke(traj, ["--store", str(store.root), "ls"])
    assert listed.exit_code == 0 and "\x1b" not in listed.output


def test_traj_export_to_an_unwritable_path_is_one_line(hostile_run, tmp_path):
    _, _, store, _ = hostile_run
    (tmp_path / "a-file").write_text("")
    for output in (tmp_path / "a-file" / "out.jsonl", tmp_path):
        exported = CliRunner().invoke(traj, ["--store", str(store.root), "export", "--format", "jsonl",
                                             "-o", str(output)])
        assert exported.exit_code == 1 and exported.exception.__class__ is SystemExit, exported.output
        assert exported.output.startswith("Error: cannot write ") and exported.output.count("\n") == 1
