"""`deps_in_env` (issue 27), in Docker: a version's dependencies are installed once, in the env layer,
from the repository at its environment_setup_commit, whose tree (without .git) the instance layers
write only their differences over; the project itself is not in the env, no later file is visible in
an instance, the instance's own install finds the dependencies in place, and grading is as before."""

from __future__ import annotations

import pytest

from codeagent.evals.batch import grade_task
from codeagent.harness.environment import task_images
from codeagent.harness.specs import spec_for
from codeagent.sandbox.engine import docker_client
from codeagent.task import Task
from tests.support.calc import CONFIG, GOLD, OLD_TESTS, SOURCE, TEST_PATCH
from tests.support.git import git

pytestmark = pytest.mark.usefixtures("no_leaks")

# calc needs `six` (not a dependency of pytest, so only this install brings it)
SETUP = "from setuptools import setup\nsetup(name='calc', version='1.0', py_modules=['calc'], install_requires=['six'])\n"
DEPS_CONFIG = {**CONFIG, "install": ["python -m pip install -e ."], "deps_in_env": True}


@pytest.fixture(scope="module")
def tasks(tmp_path_factory, base_image) -> list[Task]:
    """Two instances of one version at two commits, and the version's setup commit after both (it has
    a file neither instance has: it must not reach any image)."""
    repo = tmp_path_factory.mktemp("deps") / "calc"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text("import six\n\n" + SOURCE)
    (repo / "tests" / "test_calc.py").write_text(OLD_TESTS)
    (repo / "setup.py").write_text(SETUP)
    (repo / "zeros.dat").write_bytes(bytes(4_000_000))  # unchanged everywhere: 4 MB on disk, 4 KB as a git object
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc")
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "NOTES").write_text("second\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "notes")
    second = git(repo, "rev-parse", "HEAD").strip()
    (repo / "future.txt").write_text("the fix, from later\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "future")
    setup = git(repo, "rev-parse", "HEAD").strip()
    return [Task(repo=str(repo), base_commit=commit, instance_id=f"synthetic__calc-{n}", problem_statement="add()",
                 test_patch=TEST_PATCH, gold_patch=GOLD, FAIL_TO_PASS=["tests/test_calc.py::test_add"],
                 PASS_TO_PASS=["tests/test_calc.py::test_mul"], version="1.0", environment_setup_commit=setup,
                 extra={"install_config": DEPS_CONFIG}) for n, commit in enumerate((first, second), 1)]


def run(image: str, script: str) -> tuple[int, str]:
    client = docker_client()
    container = client.containers.run(image, ["bash", "-c", script], detach=True, network_mode="none")
    try:
        code = container.wait(timeout=60)["StatusCode"]
        return code, container.logs().decode()
    finally:
        container.remove(force=True)


def test_the_dependencies_are_in_the_shared_env_layer_and_the_project_is_not(tasks, tmp_path):
    specs = [spec_for(task) for task in tasks]
    assert specs[0].deps_commit == tasks[0].environment_setup_commit
    first = task_images(tasks[0], specs[0], log_dir=tmp_path / "first")
    second = task_images(tasks[1], specs[1], log_dir=tmp_path / "second")
    assert first.env == second.env and first.instance != second.instance

    # the env: the dependencies, not the project; the setup commit's tree as committed, without .git
    code, out = run(first.env, "python -c 'import six; print(six.__version__)' && echo files: $(ls -A /testbed); "
                               "cd / && python -m pip show calc 2>&1; python -c 'import calc' 2>&1; echo end")
    assert code == 0 and "files: NOTES calc.py future.txt setup.py tests zeros.dat\n" in out, out
    assert "not found: calc" in out and "No module named 'calc'" in out, out

    log = (tmp_path / "first" / "instance_build.log").read_text()
    assert "Requirement already satisfied: six" in log and "Successfully installed calc" in log, log
    assert "six-" not in log.split("Successfully installed", 1)[1].splitlines()[0]
    # the instance: its own commit exactly (the later files gone, its git history its own)
    code, out = run(first.instance, "cd /testbed && python -c 'import calc, six; print(calc.__file__)' && "
                                    "git status --porcelain && git log --format=%s && ls -A")
    assert code == 0 and "/testbed/calc.py" in out and "future.txt" not in out and "NOTES" not in out, out
    assert "codeagent base" in out and "future" not in out.split("codeagent base")[1], out
    code, out = run(second.instance, "cd /testbed && cat NOTES && git status --porcelain && ls -A")
    assert code == 0 and out.startswith("second\n") and "future.txt" not in out, out

    # each instance layer holds what its commit changed, not another copy of the tree (zeros.dat: 4 MB)
    client = docker_client()
    env_size = client.images.get(first.env).attrs["Size"]
    for image in (first.instance, second.instance):
        assert client.images.get(image).attrs["Size"] - env_size < 1_500_000


def test_gold_resolves_on_the_shared_dependencies(tasks, tmp_path):
    report = grade_task(tasks[1], GOLD, tmp_path)
    assert report["outcome"] == "resolved", report.get("reason")
    assert report["layers_built"] == []  # the images of the test before, nothing rebuilt
