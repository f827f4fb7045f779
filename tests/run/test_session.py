"""The interactive session (codeagent/run/session/) driven on its own, as a client does, without Textual:
the bundled example solved by its scripted solution in a real Docker sandbox, with approvals, an undo
and an apply; and the package's promise that none of it imports Textual."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import codeagent.run.session as session_package
from codeagent.assets import asset_path
from codeagent.config import Config
from codeagent.events import Finished
from codeagent.models import ScriptedModel
from codeagent.run.examples import example_repo, example_task, scripted_turn
from codeagent.run.session import Decision, Notice, Session, SessionChanged, Submitted
from codeagent.trajectory.store import TrajectoryStore
from tests.support.git import git

CHANGELOG = {"say": "And a changelog entry.", "call": "editor",
             "args": {"command": "create", "path": "CHANGELOG.md", "file_text": "- remove() drops empty lines\n"}}


class Client:
    """What a front end does: takes the session's events and answers its approval requests."""

    def __init__(self, session: Session, decisions: list[Decision]):
        self.events, self.requests, self.decisions = [], [], list(decisions)
        session.connect(emit=self.events.append, ask=self.ask)

    def ask(self, request):
        self.requests.append(request)
        request.answer(self.decisions.pop(0))

    def notices(self, level: str) -> list[str]:
        return [event.text for event in self.events if isinstance(event, Notice) and event.level == level]


def cart_script() -> list[dict]:
    """The example's scripted solution with one more edit (a changelog) before it submits."""
    script = yaml.safe_load(asset_path("evals", "examples", "cart", "script.yaml").read_text())
    script = [*script[:-1], CHANGELOG, script[-1]]
    return [scripted_turn(index, turn) for index, turn in enumerate(script, start=1)]


@pytest.mark.usefixtures("no_leaks")
def test_the_session_solves_the_example_with_approvals_then_undoes_a_change_and_applies_the_fix(tmp_path):
    checkout = tmp_path / "cart"
    git(tmp_path, "clone", "-q", str(example_repo("cart")), str(checkout))  # the user's own working tree
    config = Config(agent={"localize": False}, trajectories_dir=str(tmp_path / "trajectories"))
    model = ScriptedModel(cart_script())
    session = Session(config, model, repo=checkout, mode="suggest", store=TrajectoryStore(tmp_path / "trajectories"))
    client = Client(session, [Decision("once")] * 4)
    try:
        assert session.submit(example_task("cart")["problem_statement"]) is Submitted.STARTED
        assert session.busy and session.submit("   ") is Submitted.IGNORED
        assert session.wait_idle(120)
        # suggest mode: the search and the view ran without asking; the commands and the edits asked
        assert [(r.kind, r.body_language) for r in client.requests] == [
            ("command", "bash"), ("edit", "diff"), ("command", "bash"), ("edit", "diff")]
        assert "+        if line.quantity == 0:" in client.requests[1].body
        assert session.last_status == "submitted" and session.state.trajectory_id == session.trajectory_id
        assert "shop/cart.py" in session.patch and "CHANGELOG.md" in session.patch
        assert any(isinstance(event, Finished) for event in client.events)
        assert isinstance(client.events[-1], SessionChanged) and not session.status()["busy"]

        assert session.undo() and session.wait_idle(60)  # the last change: the changelog
        assert "CHANGELOG.md" not in session.patch and "shop/cart.py" in session.patch
        assert session.sandbox.run("test -e CHANGELOG.md").exit_code != 0
        assert session.store.load(session.trajectory_id).patch == session.patch
        assert session.state.notes and "reverted your last change of step 6 (CHANGELOG.md)" in session.state.notes[0]

        assert session.apply() and session.wait_idle(60)
        assert client.notices("success")[-1].startswith(f"applied to {checkout}")
        assert not (checkout / "CHANGELOG.md").exists()
        tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                               cwd=checkout, capture_output=True, text=True)
        assert tests.returncode == 0, tests.stdout  # the fix, applied, makes the example's tests pass
    finally:
        session.close()
    assert session.sandbox is None and session.sandbox_state == "closed"


class Offered(ScriptedModel):
    """Records the tools offered at each call."""

    def __init__(self, turns):
        super().__init__(turns)
        self.offered: list[set[str]] = []

    def complete(self, messages, tools, sampling):
        self.offered.append({tool["function"]["name"] for tool in tools})
        return super().complete(messages, tools, sampling)


@pytest.mark.usefixtures("no_leaks")
def test_a_turn_offers_only_the_tools_it_was_sent_with_and_the_next_plain_message_all_again(make_repo, tmp_path):
    answer = {"role": "assistant", "content": "Done."}
    model = Offered([answer, answer, answer])
    session = Session(Config(agent={"localize": False}, trajectories_dir=str(tmp_path / "t")), model,
                      repo=make_repo({"a.py": "x = 1\n"}), mode="full-auto")
    try:
        assert session.submit("look", only_tools=frozenset({"bash", "submit"})) is Submitted.STARTED
        assert session.wait_idle(60) and session.last_status == "answered"
        assert session.submit("again") is Submitted.CONTINUED and session.wait_idle(60)  # the tools stay as they are
        assert session.submit("and now all", only_tools=None) is Submitted.CONTINUED and session.wait_idle(60)
    finally:
        session.close()
    assert model.offered[0] == model.offered[1] == {"bash", "submit"}
    assert {"bash", "submit", "editor"} <= model.offered[2]


def test_modes_change_through_the_session_and_a_bad_one_is_refused(tmp_path):
    session = Session(Config(trajectories_dir=str(tmp_path)), None, repo=tmp_path)
    seen = []
    session.connect(emit=seen.append)
    session.set_mode("full-auto")
    session.set_work_mode("plan")
    assert session.mode == "full-auto" and session.status()["plan"] and session.work_mode == "plan"
    assert isinstance(seen[-1], SessionChanged)
    with pytest.raises(ValueError):
        session.set_work_mode("reckless")
    with pytest.raises(ValueError):
        session.set_mode("yolo")
    assert (session.mode, session.work_mode) == ("full-auto", "plan")
    session.close()
    assert session.submit("too late") is Submitted.CLOSED


def session_modules() -> list[str]:
    return sorted(f"{session_package.__name__}.{module.name}" for module in pkgutil.iter_modules(session_package.__path__))


def test_no_module_of_the_session_imports_textual():
    package = Path(session_package.__file__).parent
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            assert not any(name.split(".")[0] == "textual" for name in names), f"{path.name} imports {names}"
    # nor indirectly: every module of the package and ACP's, imported in a fresh interpreter
    modules = [*session_modules(), "codeagent.acp.server", "codeagent.acp.updates"]
    code = ("import importlib, sys\n"
            f"for name in {modules!r}: importlib.import_module(name)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual' or m.startswith('codeagent.tui')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]" and len(modules) > 15
