"""Mined candidates as tasks: the environment, the statement and its leak check, the rows, the record."""

from __future__ import annotations

import json

import pytest

from codeagent.data import load_tasks
from codeagent.harness.specs.directives import test_command
from codeagent.harness.specs.swebench import spec_for
from codeagent.mine.candidates import Skip, candidate
from codeagent.mine.environment import (
    Repository,
    language_environment,
    nearest_version,
    stated_version,
    task_for,
)
from codeagent.mine.mining import Options, open_repository, prepare
from codeagent.mine.output import Exclusions, dedupe, normalized_digest, read_exclusions, row, split
from codeagent.mine.state import MiningState, state_path
from codeagent.mine.statement import leaks, referenced_issues, statement
from codeagent.mine.validate import Validation, lists_from_runs
from codeagent.mine.walk import history
from tests.support.git import git
from tests.support.history import FIX_MESSAGE, history_repo


@pytest.fixture
def repo(tmp_path) -> Repository:
    return open_repository(str(history_repo(tmp_path)), "synthetic/calc")


def _commit(repo: Repository, subject: str):
    return next(c for c in history(repo.git_dir) if c.message.startswith(subject))


def _prepare(repo: Repository, subject: str, **options):
    return prepare(repo, _commit(repo, subject), Options(**options), frozenset(), None, set())


def test_a_python_repository_without_a_spec_gets_the_generic_environment_the_harness_accepts(repo):
    task = _prepare(repo, "Fix add()")
    assert task.instance_id == f"synthetic__calc-{task.commit[:12]}" and task.version is None
    assert task.base_commit == _commit(repo, "Fix add()").parent
    environment = task.environment
    assert environment["log_parser"] == "pytest" and environment["install"] == []  # not a package
    spec = spec_for(task)
    assert spec.python_used == "3.11" and not spec.notes
    assert test_command(task, spec) == "python -m pytest -rA tests/test_calc.py"


def test_a_package_is_installed(tmp_path):
    root = history_repo(tmp_path)
    (root / "pyproject.toml").write_text("[project]\nname = 'calc'\nversion = '1.0'\n")
    (root / "calc.py").write_text("def add(a, b):\n    return a + b + 0\n")
    (root / "tests" / "test_plus.py").write_text("def test_plus():\n    pass\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "package")
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_plus.py").write_text("def test_plus():\n    assert 1\n")
    git(root, "commit", "-qam", "add() returns a + b without a needless + 0")
    repository = open_repository(str(root), "synthetic/calc")
    task = prepare(repository, history(repository.git_dir)[0], Options(), frozenset(), None, set())
    assert task.environment["install"] == ["python -m pip install -e ."]


def test_a_repository_with_a_swebench_spec_gets_its_version(tmp_path):
    root = history_repo(tmp_path)
    for version, subject in (("2.3.1.dev", "2.3"), ("1.1.4", "old")):
        (root / "src" / "flask").mkdir(parents=True, exist_ok=True)
        (root / "src" / "flask" / "__init__.py").write_text(f'__version__ = "{version}"\n')
        git(root, "add", "-A")
        git(root, "commit", "-qm", f"version {version}")
        (root / "calc.py").write_text(f"# {subject}\n" + (root / "calc.py").read_text())
        (root / "tests" / "test_calc.py").write_text(f"# {subject}\n" + (root / "tests" / "test_calc.py").read_text())
        git(root, "commit", "-qam", f"change at {subject}")
    flask = Repository(root / ".git", "pallets/flask", str(root))
    newest, _, at_23, _ = history(flask.git_dir, max_commits=4)
    assert stated_version(flask, at_23.sha) == "2.3"
    task = task_for(flask, candidate(flask.git_dir, at_23))
    assert task.version == "2.3" and task.environment is None  # graded as an eval task is
    assert spec_for(task).layers[-1] == "flask.yaml: versions.2.3"
    with pytest.raises(Skip, match="no spec version at or below 1.1"):
        task_for(flask, candidate(flask.git_dir, newest))


def test_nearest_version_is_the_highest_not_above():
    known = ["2.0", "2.3", "2.10", "3.0"]
    assert nearest_version("2.9", known) == "2.3"
    assert nearest_version("2.12", known) == "2.10"
    assert nearest_version("3.2", known) == "3.0"
    assert nearest_version("1.9", known) is None


def test_another_language_takes_the_repositorys_test_report():
    from codeagent.harness.toolchain.resolve import TestReport

    report = TestReport("go", "go test -json ./...", "go_json")
    assert language_environment(report) == {"language": "go", "test_cmd": "go test -json ./...", "log_parser": "go_json",
                                            "pre_install": ["go test -count=1 -exec /bin/true ./... >/dev/null 2>&1 || true"],
                                            "repo_spec": False}
    rust = language_environment(TestReport("rust", "cargo test", "cargo"))
    assert "pre_install" not in rust  # compiling would run its build scripts


def test_the_statement_is_the_message_and_a_leak_is_refused(repo):
    assert _prepare(repo, "Fix add()").problem_statement == FIX_MESSAGE
    with pytest.raises(Skip, match="statement leaks the fix: 'return a - b  # subtract b from a'"):
        _prepare(repo, "Add sub")
    assert referenced_issues("Fix add() (#12), closes #7 and #12") == ["12", "7"]
    assert statement("Merge pull request #12 from a/b\n\nFix add()", {"12": "add() is wrong"}) == \
        "Fix add()\n\nIssue #12:\nadd() is wrong"


def test_a_changelog_line_is_no_leak():
    gold = ("diff --git a/CHANGES.rst b/CHANGES.rst\n--- a/CHANGES.rst\n+++ b/CHANGES.rst\n@@ -1 +1,2 @@\n"
            " Changes\n+-   add() adds its arguments again\n")
    assert leaks("add() adds its arguments again", gold) == []


def test_filters_before_validation(repo):
    with pytest.raises(Skip, match="made before --after"):
        _prepare(repo, "Fix add()", after="2024-03-01")
    task = _prepare(repo, "Fix add()")
    for exclusions in (Exclusions(ids={task.instance_id}), Exclusions(bases={("synthetic/calc", task.base_commit)}),
                       Exclusions(patches={normalized_digest(task.gold_patch)})):
        with pytest.raises(Skip, match="excluded"):
            prepare(repo, _commit(repo, "Fix add()"), Options(), frozenset(), exclusions, set())
    seen = {normalized_digest(task.gold_patch)}
    with pytest.raises(Skip, match="duplicate"):
        prepare(repo, _commit(repo, "Fix add()"), Options(), frozenset(), None, seen)


def test_exclusions_read_a_benchmark_file_or_ids(tmp_path):
    rows = tmp_path / "bench.jsonl"
    rows.write_text(json.dumps({"instance_id": "a__b-1", "repo": "a/b", "base_commit": "abc", "patch": ""}) + "\n")
    found = read_exclusions(rows)
    assert found.ids == {"a__b-1"} and found.bases == {("a/b", "abc")}
    ids = tmp_path / "ids.txt"
    ids.write_text("# Lite\na__b-1\nc__d-2\n")
    assert read_exclusions(ids).ids == {"a__b-1", "c__d-2"}


def test_fail_to_pass_and_pass_to_pass_from_reruns():
    base = [{"t::new": "FAILED", "t::old": "PASSED", "t::flaky": "PASSED"},
            {"t::old": "PASSED", "t::flaky": "FAILED"}]  # t::new missing: failed
    gold = [{"t::new": "PASSED", "t::old": "PASSED", "t::flaky": "PASSED", "t::broken": "FAILED"},
            {"t::new": "XFAIL", "t::old": "PASSED", "t::flaky": "PASSED", "t::broken": "FAILED"}]
    assert lists_from_runs(base, gold) == (["t::new"], ["t::old"], ["t::flaky"])


def test_rows_are_swebench_rows_that_eval_reads(repo, tmp_path):
    task = _prepare(repo, "Fix add()")
    validation = Validation(["tests/test_calc.py::test_add"], ["tests/test_calc.py::test_mul"], ["x"],
                            [{"side": "base", "run": 1}], {"gold": "resolved", "empty": "unresolved"})
    item = row(task, task.commit, repo.source, validation)
    assert item["provenance"]["commit"] == task.commit and item["provenance"]["codeagent_version"]
    assert item["created_at"] == "2024-02-01T00:00:00Z"
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(item) + "\n")
    [loaded] = load_tasks(path)
    assert loaded.instance_id == task.instance_id and loaded.gold_patch == task.gold_patch
    assert loaded.FAIL_TO_PASS == ["tests/test_calc.py::test_add"]
    assert loaded.swebench_repo == "synthetic/calc"
    assert loaded.environment == task.environment  # graded in the same environment
    assert spec_for(loaded).test_cmd == "python -m pytest -rA"
    assert dedupe([item, item, {**item, "instance_id": "other"}]) == [item]
    sides = split([item, {**item, "created_at": "2025-01-01T10:00:00+02:00"}], "2024-06-01")
    assert [side["split"] for side in sides] == ["train", "test"]


def test_the_record_survives_a_cut_line(tmp_path):
    output = tmp_path / "tasks.jsonl"
    state = MiningState(output)
    state.add({"commit": "a", "status": "skipped", "reason": "docs-only"})
    state.add({"commit": "b", "status": "kept", "row": {"instance_id": "x"}})
    with open(state_path(output), "a") as handle:
        handle.write('{"commit": "c", "status": "ke')  # killed mid-write
    again = MiningState(output)
    assert again.done("a") and again.done("b") and not again.done("c")
    again.add({"commit": "c", "status": "skipped", "reason": "no test change"})
    third = MiningState(output)
    assert [third.done(sha) for sha in "abc"] == [True, True, True]
    assert third.kept() == [{"instance_id": "x"}] and len(third.skipped()) == 2


def test_cli_records_every_commit_and_resumes_without_redoing_any(repo, tmp_path, env):
    import subprocess
    import sys

    output = tmp_path / "out" / "tasks.jsonl"
    exclude = tmp_path / "ids.txt"  # the two candidates: nothing needs Docker
    ids = [f"synthetic__calc-{c.sha[:12]}" for c in history(repo.git_dir) if c.message.startswith(("Fix", "Add sub"))]
    exclude.write_text("\n".join(ids) + "\n")
    command = [sys.executable, "-m", "codeagent.cli", "tasks", "mine", repo.source, "--name", "synthetic/calc",
               "--output", str(output), "--exclude", str(exclude)]
    first = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "9 commits, 0 done before, 0 candidates to validate" in first.stderr
    rejects = [json.loads(line) for line in (tmp_path / "out" / "tasks.rejects.jsonl").read_text().splitlines()]
    assert len(rejects) == 9 and {r["reason"] for r in rejects} >= {"docs-only", "excluded: an instance of a named benchmark"}
    assert output.read_text() == ""
    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert second.returncode == 0 and "9 commits, 9 done before" in second.stderr
    assert "skipped (candidate)" not in second.stderr  # nothing done twice
    assert len((tmp_path / "out" / "tasks.rejects.jsonl").read_text().splitlines()) == 9


def test_a_pass_the_guard_did_not_see_counts_as_failed():
    from codeagent.harness.grading.plan import Graded
    from codeagent.harness.grading.task_env import TestRun
    from codeagent.harness.grading.verdict import not_run
    from codeagent.mine.validate import statuses_of

    log = "PASSED t.py::test_ok\nXFAIL t.py::test_xfail - reason\nFAILED t.py::test_bad - boom\n"
    records = {"started": 1, "ended": 1, "replaced": [], "unverified": 0, "exit": [1], "tests": {
        "t.py::test_ok": {"setup": "passed", "call": "passed", "xfail": False},
        "t.py::test_xfail": {"setup": "failed", "xfail": True},  # its setup broke: no xfail seen
        "t.py::test_bad": {"setup": "passed", "call": "failed", "xfail": False}}}
    run = TestRun(log, 1, True, False, 1.0, judge={"pytest": {**records, "parser": "pytest"}})
    graded = Graded(not_run("harness_error", [], []), run=run)
    assert statuses_of(graded, "pytest") == {"t.py::test_ok": "PASSED", "t.py::test_xfail": "FAILED",
                                             "t.py::test_bad": "FAILED"}
    distrusted = {**records, "ended": 0}  # the session did not end: no pass is trusted
    graded = Graded(not_run("harness_error", [], []), run=TestRun(log, 1, True, False, 1.0, judge={"pytest": {**distrusted, "parser": "pytest"}}))
    assert set(statuses_of(graded, "pytest").values()) == {"FAILED"}
    unguarded = Graded(not_run("harness_error", [], []), run=TestRun(log, 1, True, False, 1.0))
    assert statuses_of(unguarded, "pytest")["t.py::test_xfail"] == "XFAIL"


def test_without_docker_the_run_stops_and_records_no_candidate_as_skipped(repo, tmp_path, env):
    import subprocess
    import sys

    output = tmp_path / "tasks.jsonl"
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "tasks", "mine", repo.source, "--name", "synthetic/calc",
                           "--output", str(output)], capture_output=True, text=True, timeout=120,
                          env={**env, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert proc.returncode == 3 and "No Docker engine answers" in proc.stderr
    state = MiningState(output)
    fix = _commit(repo, "Fix add()").sha
    assert not state.done(fix) and len(state.records) == 8  # the others are skipped for what they are


def test_eval_and_train_find_a_mined_task_at_its_provenance_without_repos(repo, tmp_path):
    from codeagent.data import DatasetError
    from codeagent.evals.tasks import eval_tasks
    from codeagent.train import TrainError
    from codeagent.train.data import rl_tasks
    from codeagent.train.recipe import DataSection

    task = _prepare(repo, "Fix add()")
    validation = Validation(["tests/test_calc.py::test_add"], [], [], [], {})
    item = row(task, task.commit, repo.source, validation)
    assert item["provenance"]["repository"] == repo.source and repo.source.startswith("/")
    path = tmp_path / "tasks.jsonl"
    url = {**item, "instance_id": "u-1", "patch": "other", "provenance": {"repository": "https://example.org/a/b.git"}}
    plain = {key: value for key, value in {**item, "instance_id": "p-1"}.items() if key != "provenance"}
    path.write_text("".join(json.dumps(one) + "\n" for one in (item, url, plain)))
    found = {one.instance_id: one.repo for one in eval_tasks(str(path), None, None, None, None, None)}
    assert found == {task.instance_id: repo.source, "u-1": "https://example.org/a/b.git",
                     "p-1": "https://github.com/synthetic/calc.git"}
    assert {one.instance_id: one.repo for one in rl_tasks(DataSection(tasks=str(path)))} == found  # GRPO's tasks
    gone = {**item, "provenance": {"repository": str(tmp_path / "moved")}}
    path.write_text(json.dumps(gone) + "\n")
    with pytest.raises(DatasetError, match=r"moved \(provenance.repository\), is not here: give a folder of mirrors"):
        eval_tasks(str(path), None, None, None, None, None)
    (tmp_path / "mirrors" / "synthetic").mkdir(parents=True)
    (tmp_path / "mirrors" / "synthetic" / "calc").symlink_to(repo.source)
    with pytest.raises(TrainError, match="is not here"):
        rl_tasks(DataSection(tasks=str(path)))
    [by_repos] = eval_tasks(str(path), None, None, None, None, str(tmp_path / "mirrors"))
    assert by_repos.repo == str(tmp_path / "mirrors" / "synthetic" / "calc")  # --repos still wins
    [by_repos] = rl_tasks(DataSection(tasks=str(path), repos=str(tmp_path / "mirrors")))
    assert by_repos.repo == str(tmp_path / "mirrors" / "synthetic" / "calc")


def test_a_spec_repository_reads_its_requirements_at_the_last_commit_of_the_version(tmp_path):
    root = history_repo(tmp_path)
    (root / "src" / "flask").mkdir(parents=True)
    (root / "requirements").mkdir()

    def commit(subject: str, files: dict[str, str]) -> str:
        for name, text in files.items():
            (root / name).write_text(text)
        git(root, "add", "-A")
        git(root, "commit", "-qm", subject)
        return git(root, "rev-parse", "HEAD").strip()

    def change(subject: str) -> str:
        return commit(subject, {"calc.py": f"# {subject}\n" + (root / "calc.py").read_text(),
                                "tests/test_calc.py": f"# {subject}\n" + (root / "tests" / "test_calc.py").read_text()})

    base = commit("2.3", {"src/flask/__init__.py": '__version__ = "2.3.0.dev"\n',
                          "requirements/dev.txt": "git+https://github.com/sphinx-doc/sphinx.git@96dbe5e3\n"})
    change("fix at 2.3")
    commit("requirements from PyPI", {"requirements/dev.txt": "sphinx==4.0.2\n"})
    last_23 = commit("release 2.3.1", {"src/flask/__init__.py": '__version__ = "2.3.1"\n'})
    commit("3.0", {"src/flask/__init__.py": '__version__ = "3.0.0.dev"\n'})
    change("fix at 3.0")
    tip = change("another fix at 3.0")
    flask = Repository(root / ".git", "pallets/flask", str(root))
    newest, at_30, _, _, _, at_23 = history(flask.git_dir, max_commits=6)
    old = task_for(flask, candidate(flask.git_dir, at_23))
    assert old.base_commit == base and old.environment_setup_commit == last_23
    spec = spec_for(old)
    assert spec.requirements == ["requirements/dev.txt"] and spec.requirements_commit == last_23
    assert git(root, "show", f"{spec.requirements_commit}:requirements/dev.txt") == "sphinx==4.0.2\n"
    assert {task_for(flask, candidate(flask.git_dir, c)).environment_setup_commit for c in (newest, at_30)} == {tip}
    assert task_for(flask, candidate(flask.git_dir, at_23), ref=last_23).environment_setup_commit == last_23
    item = row(old, at_23.sha, flask.source, Validation(["t"], [], [], [], {}))
    assert item["environment_setup_commit"] == last_23  # the row carries it: graded in the same environment
