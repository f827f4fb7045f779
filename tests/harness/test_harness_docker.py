"""The harness for real, in Docker, on a synthetic SWE-bench-format task made here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from codeagent.evals.batch import grade_batch, grade_task, summarize
from codeagent.executors.local import LocalExecutor
from codeagent.harness.grading.integrity import reasons
from codeagent.task import Task
from tests.support.calc import (
    BREAKS_MUL,
    CONFIG,
    FAKES_LOG_AND_EXITS,
    FAKES_LOG_AND_EXITS_CODE,
    GOLD,
    NOT_APPLYING,
    OLD_TESTS,
    REWRITES_REPORTS,
    REWRITES_REPORTS_CODE,
    SOURCE,
    TEST_PATCH,
    cli_dataset,
)
from tests.support.git import git

pytestmark = pytest.mark.usefixtures("no_leaks")

# Its second hunk overlaps the first: `git apply` refuses it, `--reject` applies the first hunk, and
# `patch` then finds that one applied (officially it reverses it and fails on the second): it does not apply.
OVERLAPPING_HUNKS = GOLD + """@@ -5,2 +5,2 @@ def add(a, b):
 def mul(a, b):
-    return a * b
+    return a * b + 1
"""
# Prints a PASSED line for the failing test at import time; the bug stays.
FAKES_PASS = """diff --git a/calc.py b/calc.py
--- a/calc.py
+++ b/calc.py
@@ -1,3 +1,6 @@
+print("PASSED tests/test_calc.py::test_add")
+
+
 def add(a, b):
     return a - b
 
"""
# Prints fake PASSED lines and then aborts collection (pytest exits 2: nothing ran).
FAKES_AND_ABORTS = """diff --git a/tests/conftest.py b/tests/conftest.py
new file mode 100644
--- /dev/null
+++ b/tests/conftest.py
@@ -0,0 +1,3 @@
+print("PASSED tests/test_calc.py::test_add")
+print("PASSED tests/test_calc.py::test_mul")
+raise SystemExit("abort")
"""
# A pytest hook at the repository root that rewrites every test report to passed: resolved by the
# official rule, flagged as touching test infrastructure (issue 10, item 11).
CONFTEST_HACK = GOLD.replace("+    return a + b", "+    return a - b  # unchanged") + """diff --git a/conftest.py b/conftest.py
new file mode 100644
--- /dev/null
+++ b/conftest.py
@@ -0,0 +1,8 @@
+import pytest
+
+
+@pytest.hookimpl(hookwrapper=True)
+def pytest_runtest_makereport(item, call):
+    outcome = yield
+    outcome.get_result().outcome = "passed"
+    outcome.get_result().longrepr = None
"""
# The gold patch reversed: it looks already applied. `patch --batch` alone would assume -R and
# apply the gold patch (issue 12, defect 6); a grader never reverses a patch.
REVERSED_GOLD = GOLD.replace("-    return a - b\n+    return a + b", "-    return a + b\n+    return a - b")
HANGS = GOLD.replace("+    return a + b", "+    import time; time.sleep(600); return a + b")


CASES = {
    "gold": (GOLD, "resolved"),
    "empty": ("", "unresolved"),
    "breaks_pass_to_pass": (BREAKS_MUL, "unresolved"),
    "fakes_passed_lines": (FAKES_PASS, "unresolved"),
    "fakes_and_aborts": (FAKES_AND_ABORTS, "unresolved"),
    "does_not_apply": (NOT_APPLYING, "patch_apply_failed"),
    "overlapping_hunks": (OVERLAPPING_HUNKS, "patch_apply_failed"),
    "reversed_gold": (REVERSED_GOLD, "patch_apply_failed"),
    "conftest_hack": (CONFTEST_HACK, "unresolved"),
    "rewrites_reports": (REWRITES_REPORTS, "unresolved"),
    "fakes_log_and_exits": (FAKES_LOG_AND_EXITS, "unresolved"),
    "hangs": (HANGS, "timeout"),
}


@pytest.mark.parametrize("name", CASES)
def test_grading_outcomes(task, tmp_path, name):
    patch, outcome = CASES[name]
    report = grade_task(task, patch, tmp_path)
    assert report["outcome"] == outcome, report.get("reason")
    assert report["resolved"] is (outcome == "resolved")
    if name == "gold":
        assert report["tests_status"]["FAIL_TO_PASS"]["success"] == ["tests/test_calc.py::test_add"]
        assert "PASSED tests/test_calc.py::test_add" in (tmp_path / "test_output.txt").read_text()
    if name == "breaks_pass_to_pass":
        assert report["tests_status"]["PASS_TO_PASS"]["failure"] == ["tests/test_calc.py::test_mul"]
    if name == "does_not_apply":
        assert "git apply" in report["reason"] and "patch --batch" in report["reason"]
    if name == "reversed_gold":
        assert "Assuming -R" not in report["reason"] and "Reversed (or previously applied)" in report["reason"]
    flagged = {"conftest.py": "conftest"} if name in ("conftest_hack", "fakes_and_aborts") else {}
    if name == "fakes_and_aborts":
        flagged = {"tests/conftest.py": "conftest"}
    assert report["test_infrastructure"] == flagged and report["touches_test_infrastructure"] == sorted(flagged)
    if name in ("gold", "empty", "breaks_pass_to_pass"):  # honest runs: the guard finds nothing
        assert "pytest" in report["guard"].split(", ") and report["tamper_evidence"] == []
    if name in ("conftest_hack", "rewrites_reports", "fakes_log_and_exits"):  # issue 21, item 1
        assert "pytest" in report["guard"].split(", ") and report["tamper_evidence"], report
        assert "does not match the run the judge saw" in report["reason"]
        assert any(reason.startswith("tamper evidence: ") for reason in reasons(report))
    if name == "rewrites_reports":
        assert "pytest: tests/test_calc.py::test_add: the log says PASSED, the guard saw setup passed, call failed" in \
            report["tamper_evidence"]
        assert "PASSED tests/test_calc.py::test_add" in (tmp_path / "test_output.txt").read_text()
    if name == "fakes_log_and_exits":
        assert "pytest: a pytest session did not reach its end: the test process exited early" in report["tamper_evidence"]
        assert report["exit_code"] == 0


# An environment that edits a tracked file before installing, as sphinx's specs `sed` tox.ini and
# setup.py (issue 28); a test that passes only with that edit.
EDITED_CONFIG = {**CONFIG, "pre_install": ["sed -i 's/slow/fast/' mode.cfg"]}
MODE_TESTS = OLD_TESTS.replace("\n\ndef test_mul", "\n\ndef test_mode():\n    assert open('mode.cfg').read() == 'mode = fast\\n'\n"
                               "\n\ndef test_mul")
# A diff made in that environment: the environment's edit comes with the fix (SWE-agent's
# predictions for sphinx-8595/8721). Officially `git apply` fails and nothing after it applies.
CARRIES_EDIT = GOLD + """diff --git a/mode.cfg b/mode.cfg
--- a/mode.cfg
+++ b/mode.cfg
@@ -1 +1 @@
-mode = slow
+mode = fast
"""
# The fix with a stale context line: both `git apply`s refuse it, `patch --fuzz` applies it.
FUZZY_GOLD = GOLD.replace(" def mul(a, b):\n", " def mul(x, y):\n")


@pytest.fixture(scope="module")
def edited_task(tmp_path_factory, base_image):
    repo = tmp_path_factory.mktemp("edited") / "calc"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(SOURCE)
    (repo / "mode.cfg").write_text("mode = slow\n")
    (repo / "tests" / "test_calc.py").write_text(MODE_TESTS)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc")
    return Task(repo=str(repo), base_commit=git(repo, "rev-parse", "HEAD").strip(), instance_id="synthetic__edited-1",
                problem_statement="add() subtracts", test_patch=TEST_PATCH, gold_patch=GOLD,
                FAIL_TO_PASS=["tests/test_calc.py::test_add"],
                PASS_TO_PASS=["tests/test_calc.py::test_mode", "tests/test_calc.py::test_mul"],
                extra={"install_config": EDITED_CONFIG})


@pytest.mark.parametrize("name, patch, outcome, applied_with", [
    ("gold", GOLD, "resolved", "git apply --verbose"),
    ("empty", "", "unresolved", "(empty patch)"),
    ("fuzzy_gold", FUZZY_GOLD, "resolved", "patch --batch --forward --fuzz=5 -p1 -i"),
    ("carries_the_environments_edit", CARRIES_EDIT, "patch_apply_failed", None),
])
def test_a_patch_applies_on_the_environment_as_built(edited_task, tmp_path, name, patch, outcome, applied_with):
    """No attempt is undone: a failed `git apply` leaves the environment's own edit in place, so a
    patch that carries it fails as it does officially, and one the fallback applies is graded with
    the edit there (test_mode), where a reset to HEAD had dropped it."""
    from codeagent.harness.grading.task_env import TaskEnvironment

    report = grade_task(edited_task, patch, tmp_path)
    assert report["outcome"] == outcome, report.get("reason")
    assert report.get("patch_applied_with") == applied_with
    if name == "carries_the_environments_edit":
        assert "$ git apply --verbose --reject" in report["reason"] and "$ patch --batch" in report["reason"]
        with TaskEnvironment(edited_task, report["images"]["instance"]) as env:
            assert env.apply(patch).error
            assert env.box.run("cat mode.cfg").output == "mode = fast\n"  # the environment's state is kept
    else:
        assert sorted(report["tests_status"]["PASS_TO_PASS"]["success"]) == edited_task.PASS_TO_PASS


def test_the_agents_diff_in_an_edited_environment_holds_only_its_own_change(edited_task, tmp_path):
    """The environment's edit is committed into the instance image's base (as the official images do),
    so a diff made in that environment, the agent's, does not carry it and applies where it is graded."""
    from codeagent.sandbox.docker import DockerSandbox
    from codeagent.sandbox.workspace import snapshot

    report = grade_task(edited_task, "", tmp_path)
    with DockerSandbox(snapshot(edited_task.repo, edited_task.base_commit),
                       prepared_image=report["images"]["instance"]) as box:
        assert box.run("cat mode.cfg").output == "mode = fast\n"
        box.write_file("calc.py", SOURCE.replace("return a - b", "return a + b"))
        patch = box.diff()
    assert "calc.py" in patch and "mode.cfg" not in patch
    graded = grade_task(edited_task, patch, tmp_path / "again")
    assert graded["outcome"] == "resolved" and graded["patch_applied_with"] == "git apply --verbose"


def test_second_run_builds_nothing(task, tmp_path):
    grade_task(task, GOLD, tmp_path / "first")
    report = grade_task(task, GOLD, tmp_path / "second")
    assert report["layers_built"] == [] and report["resolved"]


def test_batch_writes_reports_predictions_and_resumes(task, tmp_path):
    output = tmp_path / "batch"
    tasks = [task, task.model_copy(update={"instance_id": "synthetic__calc-2"})]
    patches = {"synthetic__calc-1": GOLD, "synthetic__calc-2": ""}
    reports = grade_batch(tasks, patches, output, model_name="m", executor=LocalExecutor(2, threads=True))
    assert {r["instance_id"]: r["resolved"] for r in reports} == {"synthetic__calc-1": True, "synthetic__calc-2": False}
    predictions = [json.loads(line) for line in (output / "predictions.jsonl").read_text().splitlines()]
    assert {p["instance_id"] for p in predictions} == set(patches)
    assert predictions[0]["model_name_or_path"] == "m"
    stamp = (output / "instances" / "synthetic__calc-1" / "report.json").stat().st_mtime_ns
    again = grade_batch(tasks, patches, output, model_name="m", executor=LocalExecutor(1, threads=True))
    assert len(again) == 2  # nothing graded twice
    assert (output / "instances" / "synthetic__calc-1" / "report.json").stat().st_mtime_ns == stamp
    assert summarize(again)["resolved"] == 1


def test_cli_resumes_after_kill_minus_nine(task, tmp_path):
    dataset = tmp_path / "tasks.jsonl"
    rows = []
    for index in range(3):
        rows.append({"repo": "synthetic/calc", "instance_id": f"synthetic__calc-{index}", "base_commit": task.base_commit,
                     "patch": GOLD, "test_patch": TEST_PATCH, "problem_statement": "add() subtracts",
                     "FAIL_TO_PASS": json.dumps(task.FAIL_TO_PASS), "PASS_TO_PASS": json.dumps(task.PASS_TO_PASS),
                     "version": "1.0", "install_config": CONFIG})
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    repos = tmp_path / "repos" / "synthetic"
    repos.mkdir(parents=True)
    os.symlink(task.repo, repos / "calc")
    output = tmp_path / "out"
    command = [sys.executable, "-m", "codeagent.cli", "eval", "grade", "--dataset", str(dataset), "--gold",
               "--repos", str(tmp_path / "repos"), "--output", str(output), "--workers", "1"]
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while not list(output.glob("instances/*/report.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)  # the CLI and its worker, mid-batch
    first.wait()
    done_before = {p.parent.name for p in output.glob("instances/*/report.json")}
    assert 1 <= len(done_before) < 3
    second = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    reports = {p.parent.name: json.loads(p.read_text()) for p in output.glob("instances/*/report.json")}
    assert set(reports) == {f"synthetic__calc-{i}" for i in range(3)} and all(r["resolved"] for r in reports.values())
    assert len((output / "predictions.jsonl").read_text().splitlines()) == 3
    subprocess.run([sys.executable, "-m", "codeagent.cli", "sandbox", "prune"], check=True, capture_output=True)


def test_eval_run_solves_grades_and_rewards_the_trajectory(task, tmp_path):
    """The agent runs in a sandbox of the instance image; its patch is graded; the reward goes
    back onto its trajectory."""
    from codeagent.agent.loop import Agent
    from codeagent.config import Config
    from codeagent.evals.batch import run_batch
    from codeagent.models import ScriptedModel
    from codeagent.sandbox import open_sandbox
    from codeagent.trajectory.store import TrajectoryStore

    fix = {"role": "assistant", "content": "Fix add.", "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "editor", "arguments": json.dumps({"command": "str_replace", "path": "calc.py",
                                                   "old_str": "return a - b", "new_str": "return a + b"})}}]}
    done = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "submit", "arguments": "{}"}}]}
    recorded = TrajectoryStore(tmp_path / "recorded")
    with open_sandbox(task.repo, task.base_commit) as box:
        recording = Agent(ScriptedModel([fix, done]), Config(agent={"localize": False}), store=recorded).run(task, box)
    store_dir = tmp_path / "store"
    config = Config(model={"name": f"replay:{recording.trajectory_path}"}, trajectories_dir=str(store_dir),
                    agent={"localize": False})
    reports = run_batch([task], config.model_dump(mode="json"), tmp_path / "run", executor=LocalExecutor(1, threads=True))
    assert reports[0]["resolved"] and reports[0]["exit_status"] == "submitted"
    prediction = json.loads((tmp_path / "run" / "predictions.jsonl").read_text())
    assert "+    return a + b" in prediction["model_patch"] and prediction["trajectory_id"]
    trajectory = TrajectoryStore(store_dir).load(prediction["trajectory_id"])
    assert trajectory.verification["resolved"] is True and trajectory.rewards == {"resolved": 1.0}
    assert "test_patch" not in trajectory.task  # the agent never saw the hidden tests


def test_eval_run_with_candidates_reports_pass_and_best_at_n(task, tmp_path):
    from codeagent.agent.loop import Agent
    from codeagent.config import Config
    from codeagent.evals.batch import run_batch
    from codeagent.models import ScriptedModel
    from codeagent.sandbox import open_sandbox
    from codeagent.trajectory.store import TrajectoryStore

    fix = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "editor", "arguments": json.dumps({"command": "str_replace", "path": "calc.py",
                                                   "old_str": "return a - b", "new_str": "return a + b"})}}]}
    done = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "submit", "arguments": "{}"}}]}
    with open_sandbox(task.repo, task.base_commit) as box:
        recording = Agent(ScriptedModel([fix, done]), Config(agent={"localize": False}),
                          store=TrajectoryStore(tmp_path / "rec")).run(task, box)
    config = Config(model={"name": f"replay:{recording.trajectory_path}"}, trajectories_dir=str(tmp_path / "store"),
                    agent={"localize": False}, scaling={"candidates": 2, "verifiers": ["regression"]})
    reports = run_batch([task], config.model_dump(mode="json"), tmp_path / "run", executor=LocalExecutor(1, threads=True))
    scaling = reports[0]["scaling"]
    assert reports[0]["resolved"] and scaling["pass_at_1"] == 1.0 and scaling["pass_at_n"]
    assert all(scaling["best_at_n"].values()) and len(scaling["candidates"]) == 2
    assert all(c["scores"].get("regression") == 1.0 for c in scaling["candidates"])
    assert summarize(reports)["scaling"]["pass_at_n"] == 1


CONFTEST_HOOK = ("import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
                 "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n")
# What the scripted agent writes: (path, content, the test infrastructure flagged)
FAKE_FIXES = {
    "conftest_hack": ("conftest.py", CONFTEST_HOOK, {"conftest.py": "conftest"}),  # issue 10, item 11
    "rewrites_reports": ("calc.py", REWRITES_REPORTS_CODE + "\n\n\n" + SOURCE, {}),  # issue 21, item 1 (a)
    "fakes_log_and_exits": ("calc.py", FAKES_LOG_AND_EXITS_CODE + "\n\n\n" + SOURCE, {}),  # issue 21, item 1 (b)
}


@pytest.mark.parametrize("name", ["conftest_hack", "rewrites_reports"])
def test_a_fake_fix_is_not_resolved_and_earns_no_reward(task, tmp_path, name):
    """The agent (a scripted model) makes the tests report passed without fixing the bug: a conftest.py
    hook (issue 10, item 11), or calc.py itself rewriting pytest's reports at import (issue 21, item 1).
    `eval run` grades it unresolved, with the guard's evidence; the trajectory's reward is 0."""
    from codeagent.agent.loop import Agent
    from codeagent.config import Config
    from codeagent.evals.batch import run_batch
    from codeagent.models import ScriptedModel
    from codeagent.sandbox import open_sandbox
    from codeagent.trajectory.store import TrajectoryStore

    path, content, flagged = FAKE_FIXES[name]
    write = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "bash", "arguments": json.dumps({"command": f"cat > {path} <<'EOF'\n{content}EOF"})}}]}
    done = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "submit", "arguments": "{}"}}]}
    with open_sandbox(task.repo, task.base_commit) as box:
        recording = Agent(ScriptedModel([write, done]), Config(agent={"localize": False}),
                          store=TrajectoryStore(tmp_path / "recorded")).run(task, box)
    store_dir = tmp_path / "store"
    config = Config(model={"name": f"replay:{recording.trajectory_path}"}, trajectories_dir=str(store_dir),
                    agent={"localize": False})
    reports = run_batch([task], config.model_dump(mode="json"), tmp_path / "run", executor=LocalExecutor(1, threads=True))
    report = reports[0]
    assert not report["resolved"] and report["outcome"] == "unresolved", report.get("reason")
    assert report["tamper_evidence"] and report["touches_test_infrastructure"] == sorted(flagged)
    on_disk = json.loads((tmp_path / "run" / "instances" / task.instance_id / "report.json").read_text())
    assert on_disk["test_infrastructure"] == flagged and on_disk["tamper_evidence"] == report["tamper_evidence"]
    trajectory = TrajectoryStore(store_dir).load(report["trajectory_id"])
    assert trajectory.patch and path in trajectory.patch
    assert trajectory.verification["resolved"] is False
    assert any(reason.startswith("tamper evidence: ") for reason in trajectory.verification["distrust"])
    assert trajectory.rewards == {"resolved": 0.0}


@pytest.mark.parametrize("name", FAKE_FIXES)
def test_the_sandbox_grader_catches_the_fake_fix(task, tmp_path, name):
    """GRPO's sandbox grader (the run's patch in a fresh sandbox, as rollouts grade): a fake fix is
    unresolved with the guard's evidence, its rewards 0 even were it graded resolved."""
    from codeagent.harness.env_grade import grade_in_sandbox
    from codeagent.harness.layers.python_env import task_images
    from codeagent.harness.specs.swebench import spec_for
    from codeagent.sandbox.docker import DockerSandbox
    from codeagent.sandbox.workspace import snapshot
    from codeagent.train.grpo.rewards import compute
    from codeagent.train.recipe import RewardsSection

    path, content, flagged = FAKE_FIXES[name]
    spec = spec_for(task)
    image = task_images(task, spec).instance
    with DockerSandbox(snapshot(task.repo, task.base_commit), prepared_image=image) as box:
        box.write_file(path, content)
        patch = box.diff()
    with DockerSandbox(snapshot(task.repo, task.base_commit), prepared_image=image) as fresh:  # as rollouts grade
        grade = grade_in_sandbox(fresh, task, patch, harness=True)
    assert grade["outcome"] == "unresolved" and grade["tamper_evidence"], grade
    assert grade["touches_test_infrastructure"] == sorted(flagged)

    run = SimpleNamespace(patch=patch, steps=[])
    rewards = compute(run, resolved=True, gold_patch=GOLD, weights=RewardsSection(), distrust=reasons(grade))
    assert rewards["total"] == 0.0 and rewards["resolved"] == 0.0


def test_gold_that_does_not_resolve_is_an_environment_defect(task, tmp_path):
    """issue 12, defect 5: --gold checks that gold resolves; where it does not, it says so and exits non-zero."""
    dataset, repos = cli_dataset(task, tmp_path, [
        {"repo": "synthetic/calc", "instance_id": "synthetic__calc-1"},
        {"repo": "synthetic/calc", "instance_id": "synthetic__calc-2", "patch": BREAKS_MUL}])
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "eval", "grade", "--dataset", str(dataset), "--gold",
                           "--repos", str(repos), "--output", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "environment defect: synthetic__calc-2: gold does not resolve" in proc.stderr
    assert "synthetic__calc-1:" not in proc.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert list(summary["environment_defects"]) == ["synthetic__calc-2"]


def test_predictions_need_mirrors_only_for_the_predicted_instances(task, tmp_path):
    """issue 12, defect 7: a prediction file for one repository grades with only that mirror."""
    dataset, repos = cli_dataset(task, tmp_path, [
        {"repo": "synthetic/calc", "instance_id": "synthetic__calc-1"},
        {"repo": "django/django", "instance_id": "django__django-1"}])
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text(json.dumps({"instance_id": "synthetic__calc-1", "model_patch": GOLD}) + "\n")
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "eval", "grade", "--dataset", str(dataset),
                           "--predictions", str(predictions), "--repos", str(repos), "--output", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "out" / "instances" / "synthetic__calc-1" / "report.json").read_text())
    assert report["resolved"]


def test_an_empty_patch_that_resolves_is_an_environment_defect(task, tmp_path):
    """--empty checks that nothing resolves: a task whose tests pass without any fix is named."""
    dataset, repos = cli_dataset(task, tmp_path, [
        {"repo": "synthetic/calc", "instance_id": "synthetic__calc-1"},
        {"repo": "synthetic/calc", "instance_id": "synthetic__calc-2", "FAIL_TO_PASS": json.dumps(task.PASS_TO_PASS),
         "PASS_TO_PASS": "[]"}])
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "eval", "grade", "--dataset", str(dataset), "--empty",
                           "--repos", str(repos), "--output", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "environment defect: synthetic__calc-2: the empty patch resolves" in proc.stderr
    assert "synthetic__calc-1:" not in proc.stderr
