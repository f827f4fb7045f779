"""/apply across follow-ups, commits and the user's own edits; write-through mode with /undo; a session
starts from the user's working tree. Real Docker sandbox, scripted model (tests/support/session.py)."""

from __future__ import annotations

import pytest

from codeagent.config import Config
from codeagent.models import ScriptedModel
from codeagent.run.session import Session
from codeagent.trajectory.store import TrajectoryStore
from tests.support.calc import CALC_BUGGY
from tests.support.git import git
from tests.support.scripted import FILES, call, fix_add
from tests.support.session import Recorder

pytestmark = pytest.mark.usefixtures("no_leaks")


def open_session(repo, turns, tmp_path, **agent):
    config = Config(agent={"localize": False, **agent}, trajectories_dir=str(tmp_path / "trajectories"))
    recorder = Recorder()
    session = Session(config, ScriptedModel(turns), repo=str(repo), mode="full-auto",
                      store=TrajectoryStore(tmp_path / "trajectories"), ask=recorder.ask, emit=recorder.emit)
    return session, recorder


def turn(session, text):
    assert session.submit(text) in ("started", "continued")
    assert session.wait_idle(120)


def apply(session, recorder):
    assert session.apply() and session.wait_idle(30)
    return [e for e in recorder.events if type(e).__name__ == "Notice"][-1]


def test_apply_after_a_follow_up(make_repo, tmp_path):
    repo = make_repo(FILES)
    turns = [fix_add(), call("submit"),
             call("editor", command="insert", path="calc.py", insert_line=0, new_str="# calculator"), call("submit")]
    session, recorder = open_session(repo, turns, tmp_path)
    try:
        turn(session, "add() subtracts")
        first = apply(session, recorder)
        assert first.level == "success", first.text
        assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
        turn(session, "Add a header comment.")  # the applied fix is not "uncommitted changes" of the user's
        second = apply(session, recorder)
        assert second.level == "success" and "calc.py" in second.text, second.text
        assert (repo / "calc.py").read_text() == "# calculator\ndef add(a, b):\n    return a + b\n"
        again = apply(session, recorder)
        assert again.level == "success" and "nothing to apply" in again.text
    finally:
        session.close()


def test_apply_after_the_applied_change_was_committed(make_repo, tmp_path):
    repo = make_repo(FILES)
    turns = [fix_add(), call("submit"),
             call("editor", command="str_replace", path="README.md", old_str="calc", new_str="calc, fixed"),
             call("submit")]
    session, recorder = open_session(repo, turns, tmp_path)
    try:
        turn(session, "add() subtracts")
        assert apply(session, recorder).level == "success"
        git(repo, "commit", "-qam", "the agent's fix")  # committed: what changed since still applies
        turn(session, "Say it is fixed in the README.")
        third = apply(session, recorder)
        assert third.level == "success" and "README.md" in third.text, third.text
        assert (repo / "README.md").read_text() == "calc, fixed\n"
        assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
        assert git(repo, "status", "--porcelain") == " M README.md\n"
    finally:
        session.close()


def test_apply_merges_your_edits_and_refuses_a_conflict(make_repo, tmp_path):
    repo = make_repo({**FILES, "calc.py": CALC_BUGGY})
    turns = [call("editor", command="str_replace", path="calc.py", old_str="def add(a, b):\n    return a - b",
                  new_str="def add(a, b):\n    return a + b"), call("submit"),
             call("editor", command="str_replace", path="calc.py", old_str="def sub(a, b):\n    return a - b",
                  new_str="def sub(a, b):\n    return a - b  # checked"), call("submit")]
    session, recorder = open_session(repo, turns, tmp_path)
    try:
        turn(session, "add() subtracts")
        (repo / "calc.py").write_text(CALC_BUGGY + "# mine\n")
        merged = apply(session, recorder)  # your edit elsewhere in the file: merged three-way
        assert merged.level == "success" and "merged with your edits: calc.py" in merged.text, merged.text
        assert (repo / "calc.py").read_text().startswith("def add(a, b):\n    return a + b\n")
        assert (repo / "calc.py").read_text().endswith("# mine\n")

        (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return b - a\n# mine\n")
        turn(session, "Mark sub as checked.")
        refused = apply(session, recorder)  # you changed the very line the agent changed: refused, untouched
        assert refused.level == "warning" and "conflicts with" in refused.text and "calc.py" in refused.text
        assert "return b - a" in (repo / "calc.py").read_text()
    finally:
        session.close()


def test_write_through_writes_each_change_and_undo_puts_it_back(make_repo, tmp_path):
    repo = make_repo(FILES)
    (repo / "notes.txt").write_text("my notes\n")  # the user's untracked file: the agent sees it
    turns = [call("bash", command="cat notes.txt"), fix_add(),
             call("editor", command="insert", path="calc.py", insert_line=0, new_str="# calculator"), call("submit")]
    session, recorder = open_session(repo, turns, tmp_path, write_through=True)
    try:
        turn(session, "add() subtracts")
        assert any("started from the working tree with 1 changed file" in text.lower() for text in recorder.notices())
        outputs = [getattr(e, "output", "") for e in recorder.events if type(e).__name__ == "Observed"]
        assert any("my notes" in output for output in outputs)
        assert (repo / "calc.py").read_text() == "# calculator\ndef add(a, b):\n    return a + b\n"  # no /apply
        assert "notes.txt" not in session.patch  # the user's file is the base, not the agent's change
        assert session.undo() and session.wait_idle(30)
        assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"  # the working tree too
        assert session.undo() and session.wait_idle(30)
        assert (repo / "calc.py").read_text() == FILES["calc.py"]
        assert git(repo, "status", "--porcelain") == "?? notes.txt\n"
    finally:
        session.close()


def test_apply_in_a_reopened_session_after_an_earlier_apply(make_repo, tmp_path):
    repo = make_repo(FILES)
    session, recorder = open_session(repo, [fix_add(), call("submit")], tmp_path)
    try:
        turn(session, "add() subtracts")
        assert apply(session, recorder).level == "success"
    finally:
        session.close()
    turns = [call("editor", command="insert", path="calc.py", insert_line=0, new_str="# calculator"), call("submit")]
    reopened, recorder = open_session(repo, turns, tmp_path)
    try:
        reopened.resume("last", "Add a header comment.")
        assert reopened.wait_idle(120)
        applied = apply(reopened, recorder)  # the earlier apply's files are not "your edits"
        assert applied.level == "success", applied.text
        assert (repo / "calc.py").read_text() == "# calculator\ndef add(a, b):\n    return a + b\n"
    finally:
        reopened.close()
