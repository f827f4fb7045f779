"""Tasks graded (and solved) in prebuilt images pulled from a registry: the official SWE-bench
images (`--images official`), SWE-smith's and R2E-Gym's, against a local docker-registry."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from codeagent.harness.images.prebuilt import official_image, with_registry
from tests.support.prebuilt import (
    BUG,
    CONDA_STANDIN,
    FIX,
    R2E_SCRIPT,
    REPO_INIT,
    TEST_PATCH,
    official_files,
    push_standin,
    r2e_files,
    remove_images,
    smith_files,
    write_jsonl,
)
from tests.support.processes import free_port


def test_official_names_follow_the_harness():
    """swebench.harness.test_spec: `<namespace>/sweb.eval.<arch>.<id lower>:<tag>`, `__` -> `_1776_`."""
    assert official_image("django__django-11099") == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    assert official_image("Foo__Bar-1", namespace="mirror") == "mirror/sweb.eval.x86_64.foo_1776_bar-1:latest"
    assert with_registry("swebench/x:latest", "127.0.0.1:5000") == "127.0.0.1:5000/swebench/x:latest"
    assert with_registry("ghcr.io/a/b:1", "mirror.local/hub") == "mirror.local/hub/a/b:1"


R2E_LOG = """============ short test summary info ============
PASSED r2e_tests/test_1.py::test_add
PASSED r2e_tests/test_1.py::TestSub::test_sub
FAILED r2e_tests/test_1.py::test_known_broken - assert 0 == 1
"""


@pytest.mark.parametrize("log, resolved", [
    (R2E_LOG, True),
    (R2E_LOG.replace("FAILED r2e_tests/test_1.py::test_known_broken - assert 0 == 1", "PASSED r2e_tests/test_1.py::"
                     "test_known_broken"), False),  # a test expected to fail must still fail
    (R2E_LOG + "PASSED r2e_tests/test_1.py::test_extra\n", False),  # no test more
    (R2E_LOG.replace("PASSED r2e_tests/test_1.py::test_add\n", ""), False),  # none fewer
    ("PASSED r2e_tests/test_1.py::test_add\n", False),  # no summary section: nothing read
])
def test_r2e_gym_rule(log, resolved):
    from types import SimpleNamespace

    from codeagent.harness.grading.prebuilt_rules import r2e_grade

    expected = {"test_add": "PASSED", "TestSub.test_sub": "PASSED", "test_known_broken": "FAILED"}
    run = SimpleNamespace(timed_out=False, complete=True, exit_code=1)
    assert r2e_grade(log, expected, run).resolved is resolved


def test_swe_smith_reads_pytest_verbose_lines_last_status_wins():
    """SWE-smith runs `pytest --verbose`: `<id> PASSED [ 50%]` lines, of which SWE-bench's pytest
    parser (made for `-rA` summaries) reads only the failures."""
    from codeagent.harness.grading.prebuilt_rules import swe_smith_statuses
    from codeagent.harness.logs.parsers import parse_log

    log = ("tests/test_a.py::test_x PASSED [ 33%]\ntests/test_a.py::test_y[1-2] FAILED [ 66%]\n"
           "tests/test_a.py::test_x FAILED [100%]\n")
    statuses = swe_smith_statuses(log)
    assert dict(statuses) == {"tests/test_a.py::test_y[1-2]": "FAILED", "tests/test_a.py::test_x": "FAILED"}
    assert statuses.conflicts == {"tests/test_a.py::test_x"}
    passing = "tests/test_a.py::test_z PASSED                                  [100%]\n"
    assert dict(swe_smith_statuses(passing)) == {"tests/test_a.py::test_z": "PASSED"} and not parse_log("pytest", passing)


@pytest.fixture(scope="module")
def pushed(registry, base_image, tmp_path_factory):
    """One stand-in image per layout in the local registry, and a task file for each."""
    root = tmp_path_factory.mktemp("prebuilt")
    official = with_registry(official_image("pallets__flask-90001"), registry)
    head = push_standin(base_image, official, official_files(), CONDA_STANDIN + REPO_INIT)
    row = {"instance_id": "pallets__flask-90001", "repo": "pallets/flask", "version": "2.0", "base_commit": head,
           "problem_statement": "add() subtracts", "patch": FIX, "test_patch": TEST_PATCH,
           "FAIL_TO_PASS": ["tests/test_calc.py::test_add"],
           "PASS_TO_PASS": ["tests/test_calc.py::test_sub", "tests/test_calc.py::test_env_is_activated"]}
    missing = {**row, "instance_id": "pallets__flask-90002"}  # no image pushed for it
    smith_image = "swesmith.x86_64.acme__calc.abcd1234"
    push_standin(base_image, with_registry(f"jyangballin/{smith_image.replace('__', '_1776_')}:latest", registry),
                 smith_files(), CONDA_STANDIN + REPO_INIT)
    smith = {"instance_id": "acme__calc.abcd1234.func_pm_op_swap__x1", "repo": "swesmith/acme__calc.abcd1234",
             "patch": BUG, "image_name": smith_image, "problem_statement": "add() subtracts",
             "FAIL_TO_PASS": ["tests/test_calc.py::test_add"], "PASS_TO_PASS": ["tests/test_calc.py::test_sub"]}
    r2e_image = "namanjain12/calc_final:0123456789abcdef"
    push_standin(base_image, with_registry(r2e_image, registry), r2e_files(), R2E_SCRIPT)
    r2e = {"repo_name": "calc", "docker_image": r2e_image, "commit_hash": "0123456789abcdef",
           "problem_statement": "add() subtracts", "parsed_commit_content": "{}",
           "expected_output_json": json.dumps({"test_add": "PASSED", "test_sub": "PASSED",
                                               "test_known_broken": "FAILED"})}
    yield {"registry": registry, "root": root,
           "official": write_jsonl(root / "official.jsonl", [row, missing]),
           "smith": write_jsonl(root / "smith.jsonl", [smith]), "r2e": write_jsonl(root / "r2e.jsonl", [r2e])}
    remove_images(registry)


def _grade(pushed, dataset: str, *args: str, name: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = pushed["root"] / name
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "eval", "grade", "--dataset", str(pushed[dataset]),
                           "--registry", pushed["registry"], "--output", str(out), *args],
                          capture_output=True, text=True, timeout=600)
    reports = {p.parent.name: json.loads(p.read_text()) for p in out.glob("instances/*/report.json")}
    return proc, reports


def test_official_images_are_pulled_and_graded_in_the_official_flow(pushed):
    """Gold resolves in the official image pulled from the registry (the env activated as the
    official eval script does: a PASS_TO_PASS test checks it); an instance with no image in the
    registry is a one-line harness error, and the batch goes on."""
    proc, reports = _grade(pushed, "official", "--gold", "--images", "official", name="official-gold")
    gold = reports["pallets__flask-90001"]
    assert gold["resolved"], (gold.get("reason"), proc.stderr[-2000:])
    assert gold["image"].endswith("/swebench/sweb.eval.x86_64.pallets_1776_flask-90001:latest")
    assert sorted(gold["tests_status"]["PASS_TO_PASS"]["success"]) == ["tests/test_calc.py::test_env_is_activated",
                                                                       "tests/test_calc.py::test_sub"]
    missing = reports["pallets__flask-90002"]
    assert missing["outcome"] == "harness_error" and missing["reason"].startswith("cannot pull ")
    assert "sweb.eval.x86_64.pallets_1776_flask-90002" in missing["reason"] and "\n" not in missing["reason"]
    assert proc.returncode == 1 and "error: pallets__flask-90002: cannot pull" in proc.stderr

    proc, reports = _grade(pushed, "official", "--empty", "--images", "official", "--instances",
                           "pallets__flask-90001", name="official-empty")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert reports["pallets__flask-90001"]["outcome"] == "unresolved"


def test_an_unreachable_registry_is_a_one_line_error_per_instance(tmp_path):
    """The config keys images.source/images.registry choose the official images and the mirror; a
    mirror that does not answer is each instance's one-line error, not a crash of the batch."""
    import os

    closed = f"127.0.0.1:{free_port()}"
    config = tmp_path / "config.yaml"
    config.write_text(f"images:\n  source: official\n  registry: '{closed}'\n")
    rows = [{"instance_id": f"pallets__flask-9000{i}", "repo": "pallets/flask", "version": "2.0", "base_commit": "0" * 40,
             "problem_statement": "x", "patch": FIX, "test_patch": TEST_PATCH, "FAIL_TO_PASS": [], "PASS_TO_PASS": []}
            for i in (3, 4)]
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "eval", "grade", "--dataset",
                           str(write_jsonl(tmp_path / "rows.jsonl", rows)), "--gold", "--output", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "CODEAGENT_CONFIG": str(config)})
    assert proc.returncode == 1
    for i in (3, 4):
        report = json.loads((tmp_path / f"out/instances/pallets__flask-9000{i}/report.json").read_text())
        assert report["outcome"] == "harness_error" and "\n" not in report["reason"]
        assert report["reason"].startswith(f"cannot pull {closed}/swebench/sweb.eval.x86_64.pallets_1776_flask-9000{i}")
        assert f"error: pallets__flask-9000{i}: cannot pull {closed}/" in " ".join(proc.stderr.split())


def test_swe_smith_tasks_grade_with_their_lists_in_their_image(pushed):
    """The bug patch is applied on the clean tree of the image; the fix (its reverse) resolves,
    no fix does not."""
    proc, reports = _grade(pushed, "smith", "--gold", "--prebuild", name="smith-gold")
    assert "prebuild: 1 task(s) on 1 node(s), 2 layer(s) built" in " ".join(proc.stderr.split())  # pulled first
    (gold,) = reports.values()
    assert gold["resolved"] and gold["layout"] == "swe-smith", (gold.get("reason"), proc.stderr[-2000:])
    assert gold["image"].endswith("/jyangballin/swesmith.x86_64.acme_1776_calc.abcd1234:latest")
    proc, reports = _grade(pushed, "smith", "--empty", name="smith-empty")
    (empty,) = reports.values()
    assert proc.returncode == 0 and empty["outcome"] == "unresolved"
    assert empty["tests_status"]["FAIL_TO_PASS"]["failure"] == ["tests/test_calc.py::test_add"]


def test_the_agent_sees_neither_the_grading_tests_nor_the_image_history(pushed):
    """SWE-smith: the test files that grade the task are not in the agent's tree (a clean diff all
    the same); every layout: a one-commit repository, no later history to read."""
    from codeagent.data import load_tasks
    from codeagent.harness.images.prebuilt import image_snapshot, mark, prepare
    from codeagent.sandbox.docker import DockerSandbox

    (task,) = mark(load_tasks(pushed["smith"]), registry=pushed["registry"])
    image = prepare(task).agent
    with DockerSandbox(image_snapshot(image), prepared_image=image) as box:
        checks = "test -e tests/test_calc.py || echo hidden; git status --porcelain; git diff codeagent-base"
        assert box.run(checks).output.split() == ["hidden"]
        assert "return a - b\n\n\ndef sub" in box.read_file("/testbed/calc.py").decode()  # the bug is there
        assert box.run("git rev-list --all | wc -l").output.strip() == "1"


def test_no_git_object_of_a_hidden_test_is_left_in_the_agents_repository(pushed):
    """SWE-smith (issue 21, item 4): from inside the agent's sandbox no git command prints a hidden
    test (a commit that removed them would keep them one `git show HEAD~1:` away), nor does a compiled
    copy left beside it; the grading image still runs them (the gold resolves:
    test_swe_smith_tasks_grade_with_their_lists_in_their_image)."""
    from codeagent.data import load_tasks
    from codeagent.harness.images.prebuilt import image_snapshot, mark, prepare
    from codeagent.sandbox.docker import DockerSandbox

    (task,) = mark(load_tasks(pushed["smith"]), registry=pushed["registry"])
    images = prepare(task)
    secret = "assert add(2, 3) == 5"  # only in the hidden test file
    with DockerSandbox(image_snapshot(images.eval), prepared_image=images.eval) as box:  # the grading image has it
        assert secret in box.run("git cat-file --batch-all-objects --batch").output
    with DockerSandbox(image_snapshot(images.agent), prepared_image=images.agent) as box:
        probes = ["git log --all -p", "git show HEAD~1:tests/test_calc.py", "git fsck --lost-found --unreachable",
                  "cat .git/lost-found/other/* .git/lost-found/commit/*", "git cat-file --batch-all-objects --batch",
                  "git reflog --all -p", "git stash list -p", "cat .git/ORIG_HEAD", "git tag -l", "git branch -a",
                  "grep -ra 'add(2, 3)' /testbed"]
        for probe in probes:
            assert secret not in box.run(f"{probe} 2>&1").output, probe
        assert "test_sub" not in box.run("cat .pytest_cache/v/cache/nodeids 2>&1").output


def test_r2e_gym_tasks_grade_against_the_expected_output(pushed):
    """run_tests.sh runs the hidden tests; resolved when every test has its expected status (the one
    expected to fail still fails)."""
    instance = "calc__0123456789ab"
    predictions = write_jsonl(pushed["root"] / "r2e-fix.jsonl",
                              [{"instance_id": instance, "model_patch": FIX, "model_name_or_path": "fix"}])
    proc, reports = _grade(pushed, "r2e", "--predictions", str(predictions), name="r2e-fix")
    fixed = reports[instance]
    assert fixed["resolved"] and fixed["layout"] == "r2e-gym", (fixed.get("reason"), proc.stderr[-2000:])
    assert fixed["fail_to_pass"] == {"test_add": "PASSED", "test_sub": "PASSED", "test_known_broken": "FAILED"}
    proc, reports = _grade(pushed, "r2e", "--empty", name="r2e-empty")
    assert proc.returncode == 0 and reports[instance]["outcome"] == "unresolved"
    assert "test_add" in reports[instance]["reason"]


def test_the_agent_runs_in_the_r2e_image_without_its_hidden_tests(pushed, tmp_path):
    """A scripted agent works in the prepared image (the .venv's python first, no hidden tests in
    reach, a diff of its change only); replayed by `eval run`'s batch, its patch is graded resolved."""
    from codeagent.agent.loop import Agent
    from codeagent.config import Config
    from codeagent.data import load_tasks
    from codeagent.evals.batch import run_batch
    from codeagent.executors.local import LocalExecutor
    from codeagent.harness.images.prebuilt import image_snapshot, mark, prepare
    from codeagent.models import ScriptedModel
    from codeagent.sandbox.docker import DockerSandbox
    from codeagent.sandbox.workspace import host_tree
    from codeagent.trajectory.store import TrajectoryStore

    task = mark(load_tasks(pushed["r2e"]), registry=pushed["registry"])[0]
    images = prepare(task)

    def call(i, name, **arguments):
        return {"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}

    look = call(1, "bash", command="command -v python")
    fix = call(2, "editor", command="str_replace", path="calc.py", old_str="return a - b\n\n\ndef sub",
               new_str="return a + b\n\n\ndef sub")
    with DockerSandbox(image_snapshot(images.agent), prepared_image=images.agent) as box:
        recording = Agent(ScriptedModel([look, fix, call(3, "submit")]), Config(agent={"localize": False}),
                          store=TrajectoryStore(tmp_path / "recorded")).run(task, box)
        seen = box.run("command -v python; ls -A /testbed").output
    assert "/testbed/.venv/bin/python" in seen and "r2e_tests" not in seen and "run_tests.sh" not in seen
    tree = host_tree(image_snapshot(images.agent))  # what code navigation indexes on this machine
    assert sorted(path.name for path in tree.iterdir()) == ["README", "calc.py"]
    assert recording.patch.count("diff --git") == 1 and "+    return a + b" in recording.patch
    config = Config(model={"name": f"replay:{recording.trajectory_path}"}, trajectories_dir=str(tmp_path / "store"),
                    agent={"localize": False})
    reports = run_batch([task], config.model_dump(mode="json"), tmp_path / "run", executor=LocalExecutor(1, threads=True))
    assert reports[0]["resolved"] and reports[0]["exit_status"] == "submitted", reports[0].get("reason")


def test_rollouts_open_the_task_image_through_the_configured_mirror(pushed):
    """GRPO rollouts of a loaded (unmarked) R2E-Gym task run in its image, pulled through the
    mirror of the config key images.registry."""
    from codeagent.config import Config
    from codeagent.data import load_tasks
    from codeagent.harness.env_sandbox import agent_sandboxes, open_agent_sandbox
    from codeagent.sandbox import Limits

    (task,) = load_tasks(pushed["r2e"])
    config = Config(images={"registry": pushed["registry"]})
    options = {"registry": config.images.registry, "limits": Limits.from_settings(config.sandbox)}
    with open_agent_sandbox(task, **options) as box:
        assert box.run("command -v python; git status --porcelain; ls /root").output.split() == [
            "/testbed/.venv/bin/python"]
    start = agent_sandboxes(task, **options).start
    with start() as box:
        assert box.run("git diff codeagent-base --stat").output == ""


def test_grpo_rollouts_prepare_prebuilt_tasks_through_the_mirror(pushed):
    from codeagent.config import Config
    from codeagent.data import load_tasks
    from codeagent.train.grpo.rollouts import Rollouts
    from codeagent.train.recipe import load_recipe

    recipe = load_recipe("grpo-tiny", ["model.base=unused", "rollout.environment=harness"])
    rollouts = Rollouts(recipe, load_tasks(pushed["r2e"]), tokenizer=type("T", (), {"eos_token_id": 2})(),
                        config=Config(images={"registry": pushed["registry"]}), store=None)
    (task,) = rollouts.tasks.values()
    assert task.images["registry"] == pushed["registry"]
    rollouts._prepare_environments([task])  # pulls and prepares; no spec of codeagent's is needed


def test_a_fake_fix_is_judged_in_a_prebuilt_image_too(pushed):
    """Issue 34: a prebuilt image's own rule (SWE-smith's verbose lines here) was taken as it came; the judge
    now watches those runs as it does every other. A patch that rewrites pytest's reports at import and
    keeps the bug is unresolved with tamper evidence (it resolved on 0972c8d)."""
    from tests.support.calc import REWRITES_REPORTS

    (task_id,) = [json.loads(line)["instance_id"] for line in pushed["smith"].read_text().splitlines()]
    predictions = pushed["root"] / "fake-fix.jsonl"
    predictions.write_text(json.dumps({"instance_id": task_id, "model_name_or_path": "attack",
                                       "model_patch": REWRITES_REPORTS}) + "\n")
    proc, reports = _grade(pushed, "smith", "--predictions", str(predictions), name="smith-fake")
    (report,) = reports.values()
    assert report["outcome"] == "unresolved" and report["tamper_evidence"], (report.get("reason"), proc.stderr[-2000:])
