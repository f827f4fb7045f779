"""Test-time scaling's verifiers in a repository that is not Python run the repository's own test report
(contract 3: harness/toolchain/resolve.py test_report), in its toolchain's sandbox, not pytest."""

from __future__ import annotations

from pathlib import Path

import pytest

from codeagent.config import Config
from codeagent.harness.toolchain.resolve import resolve
from codeagent.sandbox import open_sandbox, snapshot
from codeagent.scaling.pipeline import _test_command, verify
from codeagent.scaling.types import Candidate
from codeagent.task import Task

DATA = Path(__file__).parent.parent / "data" / "toolchains"
SUB = "\n// Sub returns a minus b.\nfunc Sub(a, b int) int { return a - b }\n"
SUB_TEST = ("\nfunc TestSub(t *testing.T) {\n\tif Sub(5, 3) != 2 {\n\t\tt.Fatal(\"5 - 3 != 2\")\n\t}\n}\n")


def go_repo(make_repo) -> Path:
    """The Go toy repository (tests/data/toolchains/go: its toolchain image is shared) with a second test."""
    files = {name: (DATA / "go" / name).read_text() for name in ("go.mod", "calc.go", "calc_test.go")}
    files["calc.go"] += SUB
    files["calc_test.go"] += SUB_TEST
    return make_repo(files)


def test_a_go_repository_is_verified_with_its_own_test_report(make_repo, tmp_path):
    repo = go_repo(make_repo)
    task = Task(repo=str(repo), problem_statement="Sub is undocumented", base_commit=snapshot(repo).commit)
    assert _test_command(task, Config(trajectories_dir=str(tmp_path))) == (
        "go test -json ./...", "go_json", "the repository's go tests, read as go_json")
    configured = Config(trajectories_dir=str(tmp_path), scaling={"test_command": "go test ./..."})
    assert _test_command(task, configured) == ("go test ./...", "pytest", "scaling.test_command")  # as before


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_the_regression_verifier_sees_a_go_patch_that_breaks_a_passing_test(make_repo, tmp_path):
    repo = go_repo(make_repo)
    snap = snapshot(repo)
    task = Task(repo=str(repo), problem_statement="Sub is undocumented", base_commit=snap.commit)
    image = resolve(snap).image
    assert image is not None and image.startswith("codeagent/lang-")
    calc = (repo / "calc.go").read_text()
    with open_sandbox(snap, image=image) as sandbox:  # one harmless patch, one that breaks Add
        sandbox.write_file("calc.go", calc.replace("// Sub returns", "// Sub returns the difference:").encode())
        right = sandbox.diff()
        sandbox.write_file("calc.go", calc.replace("return a + b", "return a * b").encode())
        wrong = sandbox.diff()
    candidates = [Candidate(instance_id=task.instance_id, index=0, patch=right),
                  Candidate(instance_id=task.instance_id, index=1, patch=wrong)]
    config = Config(trajectories_dir=str(tmp_path / "t"), scaling={"verifiers": ["regression"]})
    verify(task, config, candidates, lambda: open_sandbox(snap, image=image), lambda name: None)
    assert [c.scores.get("regression") for c in candidates] == [1.0, 0.5]
    details = candidates[1].details["regression"]
    assert details["tests"] == 2 and len(details["broken"]) == 1 and "TestAdd" in details["broken"][0]
    assert details["command"] == "go test -json ./... (the repository's go tests, read as go_json)"


MUL_TEST = ("package calc\n\nimport \"testing\"\n\nfunc TestMul(t *testing.T) {\n\tif Mul(2, 3) != 6 {\n"
            "\t\tt.Fatal(\"2 * 3 != 6\")\n\t}\n}\n")
PASSING_TEST = "package calc\n\nimport \"testing\"\n\nfunc TestNothing(t *testing.T) {}\n"


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_the_reproduction_verifier_writes_and_runs_a_go_test(make_repo, tmp_path):
    from codeagent.models import ScriptedModel
    from codeagent.scaling.reproduction import RepoTest, score_reproduction, write_reproduction
    from tests.support.cart import turn

    repo = go_repo(make_repo)
    snap = snapshot(repo)
    task = Task(repo=str(repo), problem_statement="There is no Mul(a, b)", base_commit=snap.commit)
    image = resolve(snap).image
    factory = lambda: open_sandbox(snap, image=image)  # noqa: E731
    config = Config(trajectories_dir=str(tmp_path / "t"), agent={"localize": False})

    def writer(source: str) -> ScriptedModel:
        return ScriptedModel([turn("editor", command="create", path="mul_test.go", file_text=source), turn("submit")])

    kept, why = write_reproduction(task, config, writer(MUL_TEST), factory)
    assert isinstance(kept, RepoTest) and kept.files == (("mul_test.go", MUL_TEST),), why
    assert why == "kept: it fails on the original code (mul_test.go: the tests no longer build)"
    dropped, why = write_reproduction(task, config, writer(PASSING_TEST), factory)
    assert dropped is None and why == "discarded: the reproduction test (mul_test.go) does not fail on the original code"
    calc = (repo / "calc.go").read_text()
    with factory() as sandbox:
        sandbox.write_file("calc.go", (calc + "\nfunc Mul(a, b int) int { return a * b }\n").encode())
        right = sandbox.diff()
        sandbox.write_file("calc.go", (calc + "\nfunc Mul(a, b int) int { return a + b }\n").encode())
        wrong = sandbox.diff()
    candidates = [Candidate(instance_id="x", index=0, patch=right), Candidate(instance_id="x", index=1, patch=wrong)]
    score_reproduction(kept, candidates, factory, timeout=120)
    assert [c.scores["reproduction"] for c in candidates] == [1.0, 0.0], [c.details for c in candidates]
    details = candidates[1].details["reproduction"]
    assert details.startswith("fails: ") and "TestMul" in details and "," not in details


@pytest.mark.docker
@pytest.mark.usefixtures("no_leaks")
def test_a_test_report_over_the_sandboxs_output_cap_is_read_whole(make_repo):
    from codeagent.scaling.test_command import run_report

    repo = make_repo({"calc.py": ""})
    command = "for i in $(seq 1 400000); do echo \"ok $i\"; done; false || echo the end"  # 3.9 MB
    with open_sandbox(snapshot(repo)) as sandbox:
        capped = sandbox.run(command, timeout=120).output
        whole = run_report(sandbox, command, timeout=120)
        status = sandbox.run("git status --porcelain").output
    assert whole == "".join(f"ok {i}\n" for i in range(1, 400001)) + "the end\n"
    assert len(capped) < len(whole)  # the sandbox keeps part of a flood; the report is all there
    assert status.strip() == ""  # the file is beside the repository's git data: nothing in a diff
