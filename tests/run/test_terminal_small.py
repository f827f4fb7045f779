"""Small terminal fixes: `traj ls` piped and --json, `traj show SUFFIX`, `--repo .` names, no empty
patch files, a second /undo."""

from __future__ import annotations

import json

from click.testing import CliRunner

from codeagent.cli.traj_commands import traj
from codeagent.config import Config
from codeagent.events import PatchChanged
from codeagent.run.session import Notice, Session
from codeagent.task import Task
from codeagent.trajectory.store import TrajectoryStore

MODEL = "hosted_vllm/some-organisation/a-rather-long-model-name-that-needs-room"


def make_store(tmp_path):
    store = TrajectoryStore(tmp_path / "t")
    ids = []
    for issue in ("Removing all units leaves a ghost line in the cart summary page", "second"):
        writer = store.create(task={"repo": "/src/shop", "problem_statement": issue}, model=MODEL,
                              messages=[{"role": "user", "content": issue}])
        writer.update(exit_status="submitted")
        writer.close()
        ids.append(writer.id)
    return store, ids


def test_traj_ls_piped_is_not_cut_to_80_columns_and_has_json(tmp_path):
    store, ids = make_store(tmp_path)
    runner = CliRunner()
    out = runner.invoke(traj, ["--store", str(store.root), "ls"]).output
    assert MODEL in out and ids[0] in out and max(len(line) for line in out.splitlines()) > 80
    out = runner.invoke(traj, ["--store", str(store.root), "ls", "--json"]).output
    rows = [json.loads(line) for line in out.splitlines()]
    # two runs made within one second: ids order by their random suffix, not by creation
    assert sorted(row["id"] for row in rows) == sorted(ids) and rows[0]["model"] == MODEL and rows[0]["steps"] == 0
    assert rows[0]["exit_status"] == "submitted" and rows[0]["repo"] == "/src/shop"


def test_traj_show_takes_the_short_id_the_tui_shows(tmp_path):
    store, ids = make_store(tmp_path)
    result = CliRunner().invoke(traj, ["--store", str(store.root), "show", ids[1][-8:]])
    assert result.exit_code == 0, result.output
    assert ids[1] in result.output and "second" in result.output
    result = CliRunner().invoke(traj, ["--store", str(store.root), "show", "nothing-like-it"])
    assert result.exit_code == 1 and "no trajectory 'nothing-like-it'" in result.output


def test_repo_dot_is_named_by_its_directory(tmp_path, monkeypatch):
    project = tmp_path / "myproject"
    project.mkdir()
    monkeypatch.chdir(project)
    assert Task(repo=".", problem_statement="x").instance_id.startswith("myproject-")
    session = Session(Config(trajectories_dir=str(tmp_path / "t")), None, repo=".")
    assert session.repo == str(project)


def test_no_patch_file_for_a_run_that_changed_nothing(tmp_path):
    from codeagent.run.solve import write_patch_file

    path = tmp_path / "run.patch"
    assert not write_patch_file(path, "") and not path.exists()
    assert write_patch_file(path, "diff --git a/x b/x\n") and path.exists()
    assert not write_patch_file(path, "  \n") and not path.exists()  # undone back to nothing: the stale file goes


def test_a_second_undo_says_everything_is_undone(tmp_path):
    told = []
    session = Session(Config(trajectories_dir=str(tmp_path / "t")), None, repo=str(tmp_path),
                      emit=told.append)
    session.state.history.observe(PatchChanged(step=0, patch="diff --git a/x b/x\n"), 1)
    session.state.history.drop_last()  # what the first /undo did
    assert not session.undo()
    notices = [event.text for event in told if isinstance(event, Notice)]
    assert notices == ["Nothing more to undo: the agent's changes are all undone."]


def test_the_tui_says_a_key_is_missing_before_it_builds_a_sandbox(make_repo, tmp_path, monkeypatch):
    from codeagent.models import make_model

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    told = []
    repo = make_repo({"a.py": "x = 1\n"})
    session = Session(Config(agent={"localize": False}, trajectories_dir=str(tmp_path / "t")),
                      make_model("openai/gpt-4o"), repo=str(repo), emit=told.append)
    assert session.submit("fix it") == "started" and session.wait_idle(60)
    errors = [event.text for event in told if isinstance(event, Notice) and event.level == "error"]
    assert len(errors) == 1 and "needs OPENAI_API_KEY" in errors[0] and "/model NAME" in errors[0]
    assert session.sandbox_state == "none" and session.sandbox is None
