"""The TUI's session logic without Textual: approval policy, turns, undo, apply, interrupt, resume.

Sessions run the real agent loop in a real Docker sandbox, driven by the scripted model.
"""

from __future__ import annotations

import threading
import time

import pytest

from codeagent.config import Config
from codeagent.models import ScriptedModel
from codeagent.run.session import Session
from codeagent.run.session.approval import (
    ApprovalPolicy,
    Decision,
    build_request,
    command_prefixes,
    preview_edit,
)
from codeagent.run.session.patch_history import changed_files
from codeagent.tools.read_only_commands import is_read_only_command
from codeagent.trajectory.store import TrajectoryStore
from tests.support.git import git
from tests.support.scripted import FILES, call, fix_add
from tests.support.session import Recorder, make_session

# -- approval policy (no sandbox) --------------------------------------------------------------------

def test_command_prefixes_split_simple_commands_and_refuse_what_they_cannot_see():
    assert command_prefixes("python -m pytest -q tests") == [("python", "-m", "pytest")]
    assert command_prefixes("cd /testbed && git status --short | head -5") == [("cd",), ("git", "status"), ("head",)]
    assert command_prefixes("pytest 2>&1 | tail -3") == [("pytest",), ("tail",)]
    assert command_prefixes("grep -r x . 2>/dev/null") == [("grep",)]
    assert command_prefixes("PYTHONPATH=. python x.py") == [("PYTHONPATH=.", "python")]
    for unsafe in ("echo hi > a.txt", "ls $(rm -rf /)", "ls `id`", "sleep 9 &", "(cd x; ls)", "cat <<EOF", "echo 'a"):
        assert command_prefixes(unsafe) is None, unsafe
    assert command_prefixes("ls\nrm -rf build") == [("ls",), ("rm",)]  # a newline separates commands too


def test_modes_and_always_rules():
    bash = lambda command: ("bash", {"command": command})
    edit = ("editor", {"command": "str_replace", "path": "/testbed/a.py", "old_str": "x", "new_str": "y"})
    view = ("editor", {"command": "view", "path": "a.py"})
    suggest, auto_edit, full_auto = ApprovalPolicy("suggest"), ApprovalPolicy("auto-edit"), ApprovalPolicy("full-auto")
    assert [suggest.needs_approval(*c) for c in (bash("make"), edit, view, ("search", {}), ("submit", {}))] == \
        [True, True, False, False, False]
    assert [auto_edit.needs_approval(*c) for c in (bash("make"), edit, view)] == [True, False, False]
    assert not full_auto.needs_approval(*bash("rm -rf /")) and not full_auto.needs_approval(*edit)
    suggest.remember(*bash("cd /testbed && python -m pytest -q"))
    assert not suggest.needs_approval(*bash("python -m pytest tests/test_x.py -k y"))
    assert not suggest.needs_approval(*bash("cd src && python -m pytest"))
    assert suggest.needs_approval(*bash("python -m pip install x"))  # another module
    assert suggest.needs_approval(*bash("python -m pytest; rm -rf /"))  # rm is not allowed
    assert suggest.needs_approval(*bash("python -m pytest > out.txt"))  # a redirection writes a file
    suggest.remember(*edit)
    assert not suggest.needs_approval("editor", {"command": "insert", "path": "a.py", "insert_line": 0, "new_str": "z"})
    assert suggest.needs_approval("editor", {"command": "create", "path": "b.py", "file_text": ""})
    assert suggest.always_label(*bash("git status && ls -la")) == "`git status …`, `ls …`"
    assert suggest.always_label(*bash("echo x > y")) is None
    with pytest.raises(ValueError, match="unknown approval mode"):
        ApprovalPolicy("yolo")


def test_read_only_commands_run_without_asking_in_every_mode():
    bash = lambda command: ("bash", {"command": command})
    for mode in ("suggest", "auto-edit"):
        policy = ApprovalPolicy(mode)
        for command in ("ls -la", "cat calc.py", "head -5 a.py | wc -l", "tail -n 3 log", "pwd", "git status --short",
                        "git log --oneline -3", "git diff HEAD~1", "git show HEAD:calc.py", "grep -rn add . 2>/dev/null",
                        "rg -n 'def add' src", "ls && cat a.py"):
            assert not policy.needs_approval(*bash(command)), (mode, command)
        for command in ("cat a; rm b", "cat a > b", "cat $(rm -rf /)", "ls `id`", "git push", "git -c x=y diff",
                        "git diff --output=/tmp/x", "git diff --ext-diff", "rg --pre ./x pattern", "sed -i s/a/b/ a.py",
                        "GIT_EXTERNAL_DIFF=./x git diff", "cat $HOME/x", "cat a | sh", "find . -delete",
                        "ls & rm x", "(ls)", "/bin/cat a"):
            assert policy.needs_approval(*bash(command)), (mode, command)
    assert is_read_only_command("cat a | grep x") and not is_read_only_command("cat a; rm b")


def test_the_dialog_shows_an_edit_as_a_diff():
    source = b"def add(a, b):\n    return a - b\n"
    body, language = preview_edit({"command": "str_replace", "path": "calc.py", "old_str": "a - b", "new_str": "a + b"},
                                  lambda path: source)
    assert language == "diff" and "-    return a - b\n+    return a + b\n" in body and "+++ b/calc.py" in body
    body, _ = preview_edit({"command": "insert", "path": "calc.py", "insert_line": 0, "new_str": "import math\n"},
                           lambda path: source)
    assert "+import math\n def add(a, b):" in body
    request = build_request(ApprovalPolicy(), "bash", {"command": "pytest -q"})
    assert (request.title, request.body, request.always_label) == ("Run this command?", "pytest -q", "`pytest …`")
    assert request.answer(Decision("deny", "no")) and not request.answer(Decision("once"))  # the first answer wins
    assert request.wait(0).reason == "no"


def test_changed_files_compares_per_file_sections():
    a = "diff --git a/x b/x\n-1\n+2\ndiff --git a/y b/y\n+y\n"
    b = "diff --git a/x b/x\n-1\n+2\ndiff --git a/y b/y\n+y2\ndiff --git a/z b/z\n+z\n"
    assert changed_files(a, b) == ["y", "z"]


# -- sessions in a real sandbox ----------------------------------------------------------------------

@pytest.mark.usefixtures("no_leaks")
def test_a_session_asks_fixes_undoes_and_applies(make_repo, tmp_path):
    repo = make_repo(FILES)
    turns = [call("bash", "Look first.", command="awk 1 calc.py"), fix_add("Fix the sign."),
             call("bash", command="rm README.md"), call("submit"),
             call("editor", command="insert", path="calc.py", insert_line=0, new_str="# calculator"), call("submit")]
    recorder = Recorder([Decision("once"), Decision("always"), Decision("deny", "keep the README"),
                         Decision("once")])
    session, model = make_session(repo, turns, tmp_path, recorder)
    try:
        assert session.submit("add() subtracts") == "started"
        assert session.wait_idle(60)
        assert [r.kind for r in recorder.requests] == ["command", "edit", "command"], [(e.kind, getattr(e, "text", ""), getattr(e, "output", "")[:80], getattr(e, "message", "")) for e in recorder.events]
        assert recorder.requests[1].body_language == "diff" and "+    return a + b" in recorder.requests[1].body
        assert "keep the README" in model.calls[3][-1]["content"]  # the denial went back to the model
        assert session.last_status == "submitted" and "+    return a + b" in session.patch
        assert session.sandbox.read_file("README.md") == b"calc\n"

        assert session.submit("Add a header comment too.") == "continued"  # a follow-up in the same sandbox
        assert session.wait_idle(60)
        assert len(recorder.requests) == 3  # edits to calc.py were allowed always
        assert model.calls[4][-1] == {"role": "user", "content": "Add a header comment too."}
        assert session.patch.count("diff --git") == 1 and "+# calculator" in session.patch

        assert session.undo() and session.wait_idle(30)
        assert session.sandbox.read_file("calc.py") == b"def add(a, b):\n    return a + b\n"
        assert "+# calculator" not in session.patch and "+    return a + b" in session.patch
        assert session.store.load(session.trajectory_id).patch == session.patch  # resume gets the undone patch

        (repo / "calc.py").write_text("local edit\n")
        assert session.apply() and session.wait_idle(30)
        assert "uncommitted changes" in recorder.notices("warning")[-1] and (repo / "calc.py").read_text() == "local edit\n"
        git(repo, "checkout", "calc.py")
        assert session.apply() and session.wait_idle(30)
        assert "applied" in recorder.notices("success")[-1]
        assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    finally:
        session.close()
    assert session.sandbox is None and session.sandbox_state == "closed"


@pytest.mark.usefixtures("no_leaks")
def test_interrupt_then_continue_then_resume_in_a_new_session(make_repo, tmp_path):
    repo = make_repo(FILES)
    started = threading.Event()

    def slow(messages):
        started.set()
        return call("bash", command="sleep 60")

    turns = [fix_add(), slow, call("bash", command="awk 1 calc.py"), call("submit")]
    recorder = Recorder()
    session, model = make_session(repo, turns, tmp_path, recorder, mode="full-auto")
    try:
        session.submit("add() subtracts")
        assert started.wait(60)
        time.sleep(0.5)
        begun = time.monotonic()
        assert session.interrupt()
        assert session.wait_idle(30) and time.monotonic() - begun < 15
        assert session.last_status == "interrupted" and "+    return a + b" in session.patch
        session.submit("Go on.")  # continues the same trajectory in the same sandbox
        assert session.wait_idle(60) and session.last_status == "submitted"
        assert model.calls[2][-1] == {"role": "user", "content": "Go on."}
        first_id = session.trajectory_id
    finally:
        session.close()

    recorder = Recorder()
    resumed, model = make_session(repo, [call("bash", command="awk 1 calc.py"), call("submit")], tmp_path, recorder,
                                  mode="full-auto")
    try:
        assert [header.id for header in resumed.recent()] == [first_id]
        resumed.resume("last", follow_up="Check it once more.")
        assert resumed.wait_idle(60) and resumed.last_status == "submitted"
        assert "resumed" in recorder.kinds() and resumed.trajectory_id == first_id
        assert "return a + b" in model.calls[1][-1]["content"]  # the new sandbox has the patch applied
        assert resumed.store.load(first_id).steps[-1].index == 5
    finally:
        resumed.close()


@pytest.mark.usefixtures("no_leaks")
def test_model_and_sandbox_failures_are_explained_and_recoverable(make_repo, tmp_path):
    from codeagent.models import ModelRequestError

    repo = make_repo(FILES)

    def broken_model(messages):
        raise ModelRequestError("401 Unauthorized: invalid API key")

    def kill_the_container(messages):
        session.sandbox.container.remove(force=True)
        return call("bash", command="true")

    turns = [broken_model, fix_add(), kill_the_container, call("bash", command="awk 1 calc.py"), call("submit")]
    recorder = Recorder()
    session, model = make_session(repo, turns, tmp_path, recorder, mode="full-auto")
    try:
        session.submit("add() subtracts")
        assert session.wait_idle(60) and session.last_status == "model_error"
        session.submit("Try again.")
        assert session.wait_idle(60) and session.last_status == "sandbox_error", recorder.notices()
        assert session.sandbox is None and session.sandbox_state == "failed"
        session.submit("Go on.")  # a new sandbox, with the patch so far applied
        assert session.wait_idle(60) and session.last_status == "submitted"
        assert "return a + b" in model.calls[4][-1]["content"]
    finally:
        session.close()


def test_a_bad_repository_is_reported_not_raised(tmp_path):
    recorder = Recorder()
    session, _ = make_session(tmp_path / "missing", [], tmp_path, recorder)
    assert session.submit("anything") == "started" and session.wait_idle(30)
    assert "does not exist" in recorder.notices("error")[0] and not session.busy
    session.close()


@pytest.mark.usefixtures("no_leaks")
def test_several_candidates_then_a_follow_up_on_the_selected_one(make_repo, tmp_path):
    repo = make_repo(FILES)
    recorder = Recorder()
    config = Config(agent={"localize": False}, trajectories_dir=str(tmp_path / "trajectories"),
                    scaling={"candidates": 2, "verifiers": ["regression"], "policy": "vote",
                             "test_command": "python -c 'from calc import add; assert add(1, 2) == 3'"})
    model = ScriptedModel([fix_add(), call("submit"), call("bash", command="awk 1 calc.py"), call("submit")])
    session = Session(config, model, repo=str(repo), mode="suggest", store=TrajectoryStore(tmp_path / "trajectories"),
                      ask=recorder.ask, emit=recorder.emit)
    try:
        session.submit("add() subtracts")
        assert session.wait_idle(120) and session.last_status == "submitted", recorder.notices()
        assert len(session.state.candidate_runs) == 2 and session.trajectory_id in session.state.candidate_runs
        assert "+    return a + b" in session.patch and not recorder.requests  # candidates do not ask
        kinds = recorder.kinds()
        assert kinds.count("candidate_scored") == 2 and "selection_made" in kinds and "resumed" in kinds
        assert "Selected candidate" in recorder.notices("success")[-1]
        session.submit("Check it.")  # continues the selected candidate in a new sandbox (the model restarts its script)
        assert session.wait_idle(60)
        assert recorder.requests and recorder.requests[0].kind == "edit"  # follow-ups ask again
    finally:
        session.close()


@pytest.mark.usefixtures("no_leaks")
def test_without_a_model_the_issue_waits_for_one(make_repo, tmp_path):
    repo = make_repo(FILES)
    recorder = Recorder()
    session, _ = make_session(repo, [], tmp_path, recorder, mode="full-auto")
    session.model = None
    session.agent.use_model(None)
    try:
        session.submit("add() subtracts")
        assert session.wait_idle(30) and "/model NAME" in recorder.notices("error")[-1]
        assert session.sandbox is None and session.task.problem_statement == "add() subtracts"
        model = ScriptedModel([fix_add(), call("submit")])
        session.model = model  # what /model NAME does, with a scripted model
        session.agent.use_model(model)
        session.submit("go")
        assert session.wait_idle(60) and session.last_status == "submitted"
        assert "add() subtracts" in model.calls[0][1]["content"] and model.calls[0][-1]["content"] == "go"
    finally:
        session.close()
