"""Patches as bytes with the model as the adversary: scripted models through the real loop, the
real Docker sandbox, the real CLI and the real harness."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codeagent import patches
from codeagent.agent.loop import Agent
from codeagent.config import Config
from codeagent.evals.batch import grade_batch, run_batch
from codeagent.executors.local import LocalExecutor
from codeagent.models import ScriptedModel
from codeagent.sandbox import open_sandbox
from codeagent.task import Task
from codeagent.trajectory.schema import Trajectory
from codeagent.trajectory.store import TrajectoryStore
from tests.support.calc import CONFIG, GOLD, OLD_TESTS, SOURCE, TEST_PATCH
from tests.support.git import git
from tests.support.scripted import call

pytestmark = pytest.mark.usefixtures("no_leaks")

LATIN1 = "café crème\n".encode("latin-1")
LATIN1_EDIT = "café brûlée\n".encode("latin-1")
EDIT_LATIN1 = r"printf 'caf\351 br\373l\351e\n' > menu.txt"  # the shell writes the Latin-1 bytes


def test_a_latin1_edit_is_submitted_and_stored_byte_for_byte(make_repo, tmp_path):
    repo = make_repo({"menu.txt": LATIN1})
    store = TrajectoryStore(tmp_path / "store")
    agent = Agent(ScriptedModel([call("bash", command=EDIT_LATIN1), call("submit")]),
                  Config(agent={"localize": False}), store=store)
    with open_sandbox(str(repo), None) as box:
        result = agent.run(Task(repo=str(repo), problem_statement="brûlée, not crème"), box)
    assert result.exit_status == "submitted", result.message
    data = patches.encode(result.patch)
    assert b"-caf\xe9 cr\xe8me\n+caf\xe9 br\xfbl\xe9e\n" in data
    assert patches.encode(store.load(result.trajectory_id).patch) == data
    subprocess.run(["git", "apply", "--binary", "-"], cwd=repo, input=data, check=True)
    assert (repo / "menu.txt").read_bytes() == LATIN1_EDIT


def test_a_patch_over_the_cap_is_not_stored_and_says_so(make_repo, tmp_path):
    repo = make_repo({"a.txt": "a\n"})
    store = TrajectoryStore(tmp_path / "store")
    agent = Agent(ScriptedModel([call("bash", command="head -c 5000 /dev/zero | tr '\\0' x > big.txt"), call("submit")]),
                  Config(agent={"localize": False}, limits={"max_patch_bytes": 2000}), store=store)
    with open_sandbox(str(repo), None) as box:
        result = agent.run(Task(repo=str(repo), problem_statement="x"), box)
    assert result.exit_status == "patch_too_large" and result.patch == ""
    assert "over the cap of 2,000" in result.message and "submitted" in result.message
    saved = store.load(result.trajectory_id)
    assert saved.exit_status == "patch_too_large" and saved.patch == "" and len(saved.steps) == 2


# `codeagent solve --apply` in a user's checkout, the model scripted through a replay file.

def solve_cli(checkout, tmp_path, turns: list[dict]) -> subprocess.CompletedProcess:
    script = tmp_path / "script.json"
    script.write_text(Trajectory(id="script", model="adversary", messages=turns).model_dump_json())
    return subprocess.run([sys.executable, "-m", "codeagent.cli", "solve", "--repo", str(checkout), "--issue", "fix it",
                           "--model", f"replay:{script}", "--headless", "--apply", "--set", "agent.localize=false"],
                          capture_output=True, env=cli_env(tmp_path), timeout=300)


def cli_env(tmp_path) -> dict:
    return {**os.environ, "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "trajs"),
            "CODEAGENT_CONFIG": str(tmp_path / "no-user-config.yaml")}


@pytest.fixture
def checkout(make_repo):
    return make_repo({"menu.txt": LATIN1, "src/app.py": "print('hi')\n"}, name="checkout")


def test_solve_prints_stores_and_applies_the_exact_bytes(checkout, tmp_path):
    proc = solve_cli(checkout, tmp_path, [call("bash", command=EDIT_LATIN1), call("submit")])
    stderr = proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, stderr
    assert b"+caf\xe9 br\xfbl\xe9e\n" in proc.stdout
    patch_file = stderr.split("patch written to ")[1].split()[0]
    trajectory = TrajectoryStore(tmp_path / "trajs").load(os.path.basename(patch_file)[:-len(".patch")])
    assert Path(patch_file).read_bytes() == proc.stdout == patches.encode(trajectory.patch)
    assert trajectory.exit_status == "submitted"
    assert f"applied to {checkout}: menu.txt" in stderr
    assert (checkout / "menu.txt").read_bytes() == LATIN1_EDIT
    show = subprocess.run([sys.executable, "-m", "codeagent.cli", "traj", "show", trajectory.id],
                          capture_output=True, env=cli_env(tmp_path), timeout=120)
    assert show.returncode == 0 and "+caf\ufffd br\ufffdl\ufffde".encode() in show.stdout, show.stderr


def test_apply_refuses_a_symlink_the_model_made_to_a_host_file(checkout, tmp_path):
    proc = solve_cli(checkout, tmp_path, [
        call("bash", command="ln -s /etc/passwd evil && echo pwned >> src/app.py"), call("submit")])
    stderr = proc.stderr.decode(errors="replace")
    assert "not applied: the patch creates symlinks that point outside the repository: evil -> /etc/passwd" in stderr
    assert b"+/etc/passwd" in proc.stdout  # the patch itself is still shown and kept in the patch file
    assert not os.path.lexists(checkout / "evil")
    assert (checkout / "src" / "app.py").read_text() == "print('hi')\n"
    assert git(checkout, "status", "--porcelain", "--untracked-files=all") == ""


# eval: a Latin-1 patch is graded on its exact bytes; no instance vanishes; changed predictions regrade.

@pytest.fixture(scope="module")
def latin_task(tmp_path_factory, base_image):
    """The harness's synthetic calc task, plus a Latin-1 file the model's patch also edits."""
    repo = tmp_path_factory.mktemp("latin") / "calc"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(SOURCE)
    (repo / "tests" / "test_calc.py").write_text(OLD_TESTS)
    (repo / "menu.txt").write_bytes(LATIN1)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc")
    return Task(repo=str(repo), base_commit=git(repo, "rev-parse", "HEAD").strip(), instance_id="latin__calc-1",
                problem_statement="add() subtracts", test_patch=TEST_PATCH, gold_patch=GOLD,
                FAIL_TO_PASS=["tests/test_calc.py::test_add"], PASS_TO_PASS=["tests/test_calc.py::test_mul"],
                extra={"install_config": CONFIG})


def test_eval_run_grades_a_latin1_patch_on_its_exact_bytes(latin_task, tmp_path):
    fix = call("editor", command="str_replace", path="calc.py", old_str="return a - b", new_str="return a + b")
    with open_sandbox(latin_task.repo, latin_task.base_commit) as box:
        recording = Agent(ScriptedModel([call("bash", command=EDIT_LATIN1), fix, call("submit")]),
                          Config(agent={"localize": False}), store=TrajectoryStore(tmp_path / "rec")).run(latin_task, box)
    assert recording.exit_status == "submitted", recording.message
    config = Config(model={"name": f"replay:{recording.trajectory_path}"}, trajectories_dir=str(tmp_path / "store"),
                    agent={"localize": False})
    reports = run_batch([latin_task], config.model_dump(mode="json"), tmp_path / "run",
                        executor=LocalExecutor(1, threads=True))
    assert len(reports) == 1 and reports[0]["exit_status"] == "submitted"
    # the context line `-café crème` only matches the file's real bytes: a mangled patch would not apply
    assert reports[0]["resolved"] and reports[0]["outcome"] == "resolved", reports[0].get("reason")
    prediction = json.loads((tmp_path / "run" / "predictions.jsonl").read_text())
    assert patches.encode(prediction["model_patch"]) == patches.encode(recording.patch)
    assert b"+caf\xe9 br\xfbl\xe9e\n" in patches.encode(prediction["model_patch"])


def eval_cli(task: Task, tmp_path, *args: str) -> subprocess.CompletedProcess:
    dataset = tmp_path / "tasks.jsonl"
    row = {"repo": "latin/calc", "instance_id": task.instance_id, "base_commit": task.base_commit, "patch": GOLD,
           "test_patch": TEST_PATCH, "problem_statement": "add() subtracts", "version": "1.0",
           "FAIL_TO_PASS": json.dumps(task.FAIL_TO_PASS), "PASS_TO_PASS": json.dumps(task.PASS_TO_PASS),
           "install_config": CONFIG}
    dataset.write_text(json.dumps(row) + "\n")
    (tmp_path / "repos" / "latin").mkdir(parents=True, exist_ok=True)
    if not (tmp_path / "repos" / "latin" / "calc").exists():
        os.symlink(task.repo, tmp_path / "repos" / "latin" / "calc")
    env = {**os.environ, "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "trajs"),
           "CODEAGENT_CONFIG": str(tmp_path / "no-user-config.yaml")}
    return subprocess.run([sys.executable, "-m", "codeagent.cli", "eval", *args, "--dataset", str(dataset),
                           "--repos", str(tmp_path / "repos"), "--output", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=600)


def test_an_instance_that_errors_is_counted_and_fails_the_run(latin_task, tmp_path):
    proc = eval_cli(latin_task, tmp_path, "run", "--model", f"replay:{tmp_path / 'no-such-trajectory.json'}")
    assert proc.returncode == 1, proc.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["instances"] == 1 and summary["errors"] == 1 and summary["error_instances"] == ["latin__calc-1"]
    assert "1 of 1 instance(s) errored" in proc.stderr and "error: latin__calc-1:" in proc.stderr
    assert (tmp_path / "out" / "instances" / "latin__calc-1" / "error.json").exists()


def test_grading_changed_predictions_again(latin_task, tmp_path):
    output = tmp_path / "graded"
    first = grade_batch([latin_task], {latin_task.instance_id: GOLD}, output, model_name="m",
                        executor=LocalExecutor(1, threads=True))
    assert first[0]["resolved"]
    again = grade_batch([latin_task], {latin_task.instance_id: ""}, output, model_name="m",
                        executor=LocalExecutor(1, threads=True))
    assert not again[0]["resolved"]
    state = output / "instances" / "latin__calc-1"
    assert json.loads((state / "prediction.json").read_text())["patch_sha256"] == patches.digest("")
    assert json.loads((state / "report.previous.json").read_text())["resolved"] is True
