"""The fix alone (issue 37): a pull request is the unit where the history shows one, from where its branch
started; a long-lived branch's merge is no task, but the pull requests merged into that branch are; docs,
changelogs and vendored trees never reach the gold patch; lockfiles and generated files are held aside;
a diff that spans unrelated areas is no task."""

from __future__ import annotations

from pathlib import Path

import pytest

from codeagent.mine.candidates import Skip, candidate
from codeagent.mine.split import kind_of
from codeagent.mine.walk import history, merge_kind
from tests.support.git import git
from tests.support.history import history_repo


def _write(repo: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _commit(repo: Path, message: str, files: dict[str, str]) -> str:
    _write(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD").strip()


def _skip(repo: Path, commit) -> str | None:
    try:
        candidate(repo / ".git", commit)
    except Skip as why:
        return str(why)
    return None


@pytest.fixture
def repo(tmp_path) -> Path:
    return history_repo(tmp_path)


def test_docs_changelogs_and_vendored_trees_are_not_in_the_gold_patch(repo):
    _commit(repo, "Fix mul() for floats", {
        "calc.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return float(a) * b\n",
        "tests/test_calc.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6.0\n",
        "CHANGES.rst": "- mul() returns a float\n", "HISTORY.rst": "2.0\n", "docs/api.rst": "mul\n",
        "changelog/12.bugfix": "mul() floats\n", ".github/workflows/ci.yml": "on: push\n",
        "calc/packages/urllib3/poolmanager.py": "X = 1\n", "_vendor/six.py": "Y = 2\n",
        "poetry.lock": "# lock, again\n", "static/app.min.js": "var a;\n",
    })
    found = candidate(repo / ".git", history(repo / ".git")[0])
    assert found.source_files == ["calc.py"] and found.test_files == ["tests/test_calc.py"]
    assert "diff --git a/calc.py" in found.gold_patch and found.gold_patch.count("diff --git") == 1
    assert sorted(found.dropped_files) == sorted([
        "CHANGES.rst", "HISTORY.rst", "docs/api.rst", "changelog/12.bugfix", ".github/workflows/ci.yml",
        "calc/packages/urllib3/poolmanager.py", "_vendor/six.py"])
    assert sorted(found.held_files) == ["poetry.lock", "static/app.min.js"]  # added back only if the tests need them
    assert "poetry.lock" in found.held_patch and "poetry.lock" not in found.gold_patch


@pytest.mark.parametrize("path, kind", [
    ("requests/packages/urllib3/connection.py", "vendored"), ("packages/core/src/index.js", "source"),
    ("pip/_vendor/six.py", "vendored"), ("third_party/zlib/inflate.c", "vendored"), ("3rdparty/x/y.h", "vendored"),
    ("tests/vendor/fixture.go", "test"), ("vendor/x/tests/y.go", "vendored"), ("changelog/5221.feature.rst", "docs"),
    ("newsfragments/12.bugfix", "docs"), ("CMakeLists.txt", "source"), ("requirements/dev.txt", "lockfile"),
    ("requirements.txt", "lockfile"), (".travis.yml", "docs"), ("src/__snapshots__/a.snap", "test"),
])
def test_kinds_of_paths(path, kind):
    assert kind_of(path) == kind


def test_a_commit_whose_only_code_change_is_vendored_is_no_task(repo):
    _commit(repo, "Update urllib3 to 1.10.2", {"calc/packages/urllib3/pool.py": "Z = 3\n",
                                                "tests/test_pool.py": "def test_pool():\n    pass\n"})
    assert _skip(repo, history(repo / ".git")[0]) == "no source change (vendored only)"


@pytest.mark.parametrize("message, kind", [
    ("Merge pull request #4992 from AntoineMath/file_mode", "pull"),
    ("Merge pull request #8478 from panhaoyu/3.x", "pull"),  # a contributor's branch that happens to be named 3.x
    ("Merge pull request #8500 from sphinx-doc/3.x", "branch"),  # the project's own maintenance line
    ("Merge branch '3.x'", "branch"), ("Merge branch 'stable'", "branch"), ("Merge branch '1.7-release'", "branch"),
    ("Merge remote-tracking branch 'origin/master'", "branch"), ("Merge branch 'main' of github.com:a/b", "branch"),
    ("Merge tag 'v1.2.3'", "branch"), ("merge with stable", "branch"), ("Merge master into features", "branch"),
    ("Merge branch 'blueprint-name-dot'", "pull"), ("Merged in tk0miya/sphinx (pull request #12)", "pull"),
    ("Add hostname and timestamp to JUnit XML testsuite tag (#5692)", "pull"),
])
def test_merge_kinds(message, kind):
    assert merge_kind(message, owner="sphinx-doc") == kind


def test_a_maintenance_branch_merge_is_no_task_but_its_pull_requests_are(repo):
    """sphinx's history: pull requests merge into 3.x, and 3.x is merged into master now and then."""
    fork_point = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", "3.x")
    _commit(repo, "3.x: bump version", {"VERSION": "3.4\n"})
    maintenance = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", "fix-mul")
    fix = _commit(repo, "mul() works on floats", {
        "calc.py": (repo / "calc.py").read_text().replace("return a * b", "return float(a) * b"),
        "tests/test_mul.py": "from calc import mul\n\n\ndef test_float():\n    assert mul(1.5, 2) == 3.0\n"})
    git(repo, "checkout", "-q", "3.x")
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge pull request #8721 from tk0miya/8720_mul_floats\n\nmul() on floats",
        "fix-mul")
    git(repo, "checkout", "-q", "main")
    _commit(repo, "main moves on", {"README.md": "# calc, on main\n"})
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge branch '3.x'", "3.x")
    units = history(repo / ".git", owner="sphinx-doc")
    merge, pull = units[0], next(unit for unit in units if unit.message.startswith("Merge pull request #8721"))
    assert merge.kind == "branch" and _skip(repo, merge).startswith("branch merge: \"Merge branch '3.x'\"")
    assert pull.kind == "pull" and pull.line == merge.sha
    assert (pull.parent, pull.head) == (maintenance, fix)  # the pull request's base on 3.x, not main's state
    found = candidate(repo / ".git", pull)
    assert found.source_files == ["calc.py"] and found.test_files == ["tests/test_mul.py"]
    assert fork_point in [unit.sha for unit in units]  # main's own line is walked as before
    assert len({unit.sha for unit in units}) == len(units)  # each commit once


def test_a_diff_over_unrelated_areas_is_no_task(repo):
    files = {f"{area}/mod{number}.py": "X = 1\n" for area in ("api", "cli", "db", "web", "auth")
             for number in range(3)}
    files["tests/test_all.py"] = "def test_all():\n    pass\n"
    _commit(repo, "Sync the 2.x branch", files)
    assert _skip(repo, history(repo / ".git")[0]).startswith(
        "spans unrelated areas: 15 source files in 5 areas (api, auth, cli, db, web)")


def test_a_unit_on_a_maintenance_line_reads_its_requirements_at_that_lines_last_commit_of_the_version(repo):
    """flask-4045: a fix merged into 2.0.x, whose requirements a later 2.0.x commit fixed; main states 2.1."""
    from codeagent.mine.environment import Repository, task_for

    _commit(repo, "2.0", {"src/flask/__init__.py": '__version__ = "2.0.0.dev"\n'})
    git(repo, "checkout", "-q", "-b", "2.0.x")
    git(repo, "checkout", "-q", "-b", "fix")
    _commit(repo, "mul() on floats, with its test", {
        "calc.py": (repo / "calc.py").read_text().replace("return a * b", "return float(a) * b"),
        "tests/test_mul.py": "from calc import mul\n\n\ndef test_float():\n    assert mul(1.5, 2) == 3.0\n"})
    git(repo, "checkout", "-q", "2.0.x")
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge pull request #9 from someone/floats", "fix")
    last_20 = _commit(repo, "release 2.0.1", {"src/flask/__init__.py": '__version__ = "2.0.1"\n'})
    git(repo, "checkout", "-q", "main")
    _commit(repo, "2.1", {"src/flask/__init__.py": '__version__ = "2.1.0.dev"\n'})
    git(repo, "merge", "-q", "--no-ff", "-X", "ours", "-m", "Merge branch '2.0.x'", "2.0.x")
    flask = Repository(repo / ".git", "pallets/flask", str(repo))
    pull = next(unit for unit in history(flask.git_dir, owner="pallets") if unit.message.startswith("Merge pull request #9"))
    task = task_for(flask, candidate(flask.git_dir, pull))
    assert task.version == "2.0" and task.environment_setup_commit == last_20  # not main's 2.1 line, not the base
