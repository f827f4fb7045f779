"""`deps_layer` (issue 27), in Docker. A version's dependencies are installed once, in a deps layer over
the env layer, from the repository at its environment_setup_commit; nothing of that tree stays. Each
instance is still built on the env layer alone, exactly as without it, then written over the deps layer:
what pip resolves is the instance's own (a dependency the setup commit pins otherwise, or one only it
needs, never leaks in), and a dependency it shares is the deps layer's file, not a copy."""

from __future__ import annotations

import os

import pytest

from codeagent.evals.batch import grade_task
from codeagent.harness.layers.layer import LayerBuildError
from codeagent.harness.layers.python_env import task_images
from codeagent.harness.specs.swebench import spec_for
from codeagent.sandbox.engine import docker_client
from codeagent.task import Task
from tests.support.calc import CONFIG, GOLD, OLD_TESTS, SOURCE, TEST_PATCH
from tests.support.git import git

pytestmark = pytest.mark.usefixtures("no_leaks")

DEPS_CONFIG = {**CONFIG, "install": ["python -m pip install -e ."], "deps_layer": True}


def setup_py(*requires: str) -> str:
    return f"from setuptools import setup\nsetup(name='calc', version='1.0', py_modules=['calc'], install_requires={list(requires)})\n"


@pytest.fixture(scope="module")
def tasks(tmp_path_factory, base_image) -> list[Task]:
    """Two instances of one version at two commits, and the version's setup commit after both: it pins
    six to an older release, needs toml as the second instance does, and has a file neither has."""
    repo = tmp_path_factory.mktemp("deps") / "calc"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text("import six\n\n" + SOURCE)
    (repo / "tests" / "test_calc.py").write_text(OLD_TESTS)
    (repo / "setup.py").write_text(setup_py("six"))
    os.symlink("../../../outside", repo / "tests" / "up")  # climbs above the folder it is carried in
    git(repo, "init", "-q")
    commits = []
    for message, files in (("calc", {}), ("toml", {"NOTES": "second\n", "setup.py": setup_py("six", "toml")}),
                           ("future", {"future.txt": "the fix, from later\n", "setup.py": setup_py("six==1.16.0", "toml")})):
        for name, text in files.items():
            (repo / name).write_text(text)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", message, *([] if files else ["--allow-empty"]))
        commits.append(git(repo, "rev-parse", "HEAD").strip())
    return [Task(repo=str(repo), base_commit=commit, instance_id=f"synthetic__calc-{n}", problem_statement="add()",
                 test_patch=TEST_PATCH, gold_patch=GOLD, FAIL_TO_PASS=["tests/test_calc.py::test_add"],
                 PASS_TO_PASS=["tests/test_calc.py::test_mul"], version="1.0", environment_setup_commit=commits[2],
                 extra={"install_config": DEPS_CONFIG}) for n, commit in enumerate(commits[:2], 1)]


def run(image: str, script: str) -> str:
    client = docker_client()
    container = client.containers.run(image, ["bash", "-c", script], detach=True, network_mode="none")
    try:
        code = container.wait(timeout=60)["StatusCode"]
        output = container.logs().decode()
        assert code == 0, output
        return output
    finally:
        container.remove(force=True)


VERSIONS = ("cd / && python -c 'import six; print(\"six\", six.__version__)'; python -c 'import toml' 2>&1 | tail -1; "
            "python -c 'import calc' 2>&1 | tail -1; stat -c 'toml %Y' /opt/env/lib/python3*/site-packages/toml/__init__.py 2>&1")


@pytest.fixture(scope="module")
def images(tasks, tmp_path_factory):
    logs = tmp_path_factory.mktemp("logs")
    return [task_images(task, spec_for(task), log_dir=logs / task.instance_id) for task in tasks], logs


def test_the_version_shares_a_deps_layer_that_holds_its_dependencies_and_tree(images):
    (first, second), _ = images
    assert first.env == second.env and first.deps == second.deps and first.instance != second.instance
    assert "six" not in run(first.env, "pip list 2>/dev/null")  # the env layer is as without deps_layer
    out = run(first.deps, VERSIONS + "; echo files: $(ls -A /testbed)")
    assert "six 1.16.0" in out and "No module named 'toml'" not in out and "No module named 'calc'" in out, out
    assert "files:\n" in out, out  # nothing of the setup commit's tree


def test_each_instance_has_what_it_resolves_itself_and_only_its_own_files(images):
    (first, second), logs = images
    log = (logs / "synthetic__calc-1" / "instance_build.log").read_text()
    assert "Successfully installed calc-1.0 six-" in log, log  # built on the env layer: six resolved afresh
    out = run(first.instance, VERSIONS + "; cd /testbed && git status --porcelain && git log --format=%s && ls -A")
    assert "six 1.16.0" not in out and "six 1." in out, out  # the setup commit's pin did not leak in
    assert "No module named 'toml'" in out, out  # nor the package only the setup commit needs
    assert "future.txt" not in out and "NOTES" not in out and "codeagent base" in out, out
    assert "future" not in out.split("codeagent base")[1], out
    assert run(first.instance, "readlink /testbed/tests/up") == "../../../outside\n"

    shared = run(first.deps, VERSIONS).split("toml ")[1].split()[0]
    out = run(second.instance, VERSIONS + "; cd /testbed && cat NOTES && git status --porcelain")
    assert f"toml {shared}\n" in out and out.endswith("second\n"), out  # toml is the deps layer's file, not a copy


def test_a_deps_layer_that_changes_anything_outside_the_venv_is_refused(tasks, tmp_path):
    """Whatever the version's install leaves outside the venv would reach every instance of it."""
    stray = tasks[0].model_copy(update={"install_config": {**DEPS_CONFIG, "pre_install": [
        "touch /etc/codeagent-stray && mkdir -p /tmp/scratch && touch /tmp/scratch/ok"]}})
    with pytest.raises(LayerBuildError, match="changed /etc/codeagent-stray outside /opt/env"):
        task_images(stray, spec_for(stray), log_dir=tmp_path)


def test_gold_resolves_on_the_carried_instance(tasks, images, tmp_path):
    report = grade_task(tasks[1], GOLD, tmp_path)
    assert report["outcome"] == "resolved", report.get("reason")
    assert report["layers_built"] == []
    (_, second), _ = images
    assert report["images"]["deps"] == second.deps and report["images"]["instance"] == second.instance
