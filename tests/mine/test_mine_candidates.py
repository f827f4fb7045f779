"""Candidates from history: which commits make one, the reasons of the others, the split into patches."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from codeagent.mine.candidates import Limits, Skip, candidate, shallow_edges
from codeagent.mine.split import kind_of
from codeagent.mine.walk import history
from tests.support.git import git
from tests.support.history import REASONS, history_repo


@pytest.fixture
def repo(tmp_path) -> Path:
    return history_repo(tmp_path)


def _git_dir(repo: Path) -> Path:
    return repo / ".git"


def _outcome(repo: Path, commit, **limits) -> str | None:
    try:
        candidate(_git_dir(repo), commit, Limits(**limits), frozenset(shallow_edges(_git_dir(repo))))
    except Skip as why:
        return str(why)
    return None


def test_each_commit_is_a_candidate_or_skipped_with_its_reason(repo):
    commits = history(_git_dir(repo))
    assert [c.message.splitlines()[0] for c in reversed(commits)][1:] == list(REASONS)
    found = {c.message.splitlines()[0]: _outcome(repo, c) for c in commits}
    assert found.pop("calc") == "root commit (no parent)"
    assert found == REASONS


def test_the_diff_splits_into_a_gold_patch_and_a_test_patch_that_apply_on_the_parent(repo, tmp_path):
    fix = next(c for c in history(_git_dir(repo)) if c.message.startswith("Fix add()"))
    found = candidate(_git_dir(repo), fix)
    assert found.test_files == ["tests/test_calc.py"] and found.source_files == ["calc.py"]
    assert "+    return a + b" in found.gold_patch and "tests/test_calc.py" not in found.gold_patch
    assert "+def test_add():" in found.test_patch and "calc.py b/calc.py" not in found.test_patch
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(repo), str(checkout)], check=True)
    git(checkout, "checkout", "-q", fix.parent)
    for patch in (found.gold_patch, found.test_patch):
        subprocess.run(["git", "apply"], cwd=checkout, input=patch.encode(), check=True)
    assert git(checkout, "diff", fix.sha) == ""  # together they are the commit


def test_oversized_commits_are_skipped(repo):
    fix = next(c for c in history(_git_dir(repo)) if c.message.startswith("Fix add()"))
    assert _outcome(repo, fix, max_files=1) == "oversized: 2 files changed (more than 1)"
    assert _outcome(repo, fix, max_patch_bytes=100) == "oversized: the diff is over 100 bytes"


def test_a_shallow_clone_says_so(repo, tmp_path):
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)
    [only] = history(shallow / ".git")
    assert _outcome(shallow, only) == "shallow clone: the parent is not here"


def test_dates_and_count_select_the_commits(repo):
    git_dir = _git_dir(repo)
    assert len(history(git_dir)) == 9
    assert len(history(git_dir, max_commits=3)) == 3
    subjects = [c.message.splitlines()[0] for c in history(git_dir, since="2024-02-15", until="2024-05-15")]
    assert subjects == ["More tests", "Comment mul", "Document calc"]


def _dated(repo, date: str, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=env)
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.mark.parametrize("touch_on_main", [False, True])
def test_a_merged_branch_is_one_unit_based_where_the_main_line_stood_when_it_was_opened(repo, touch_on_main):
    """SWE-bench's base commit: the base branch's tip when the pull request was opened; its patch: the
    pull request's own diff (from the merge base). When the main line changed one of its files in between,
    the merge base itself (the patch would not apply)."""
    start = git(repo, "rev-parse", "HEAD~8").strip()  # the first commit (2024-01)
    pushed_on = git(repo, "rev-parse", "HEAD~6").strip()  # "Document calc" (2024-03-01)
    git(repo, "checkout", "-q", "-b", "topic", start)
    (repo / "util.py").write_text("def double(a):\n    return a * 2\n")
    git(repo, "add", "util.py")
    _dated(repo, "2024-03-10T00:00:00Z", "commit", "-qm", "double() on a branch")
    (repo / "tests" / "test_util.py").write_text("from util import double\n\n\ndef test_double():\n    assert double(2) == 4\n")
    git(repo, "add", "tests")
    head = _dated(repo, "2024-03-15T00:00:00Z", "commit", "-qm", "its test")
    git(repo, "checkout", "-q", "main")
    if touch_on_main:
        git(repo, "checkout", "-q", "-b", "edit", pushed_on)
        (repo / "util.py").write_text("# util\n")
        git(repo, "add", "util.py")
        _dated(repo, "2024-03-02T00:00:00Z", "commit", "-qm", "util on the main line")
        git(repo, "checkout", "-q", "main")
        git(repo, "rebase", "-q", "edit")  # the main line now holds it, before the last push
        git(repo, "branch", "-q", "-D", "edit")
        pushed_on = git(repo, "log", "--format=%H", "-1", "--before=2024-03-15T00:00:00Z").strip()
    _dated(repo, "2024-10-01T00:00:00Z", "merge", "-q", "--no-ff", "-X", "theirs", "-m",
           "Merge pull request #7 from someone/double", "topic")
    commits = history(_git_dir(repo))
    assert [c.message for c in commits[:2]] == ["Merge pull request #7 from someone/double", "Lock"]  # not the branch's commits
    assert (commits[0].kind, commits[0].head, commits[0].start or commits[0].parent) == ("pull", head, start)
    merged = candidate(_git_dir(repo), commits[0])
    assert merged.commit.parent == (start if touch_on_main else pushed_on)
    assert merged.source_files == ["util.py"] and merged.test_files == ["tests/test_util.py"]  # neither commit alone
    assert "calc.py" not in merged.gold_patch  # the main line's later changes are not the pull request's


@pytest.mark.parametrize("path, kind", [
    ("src/app.py", "source"), ("tests/test_app.py", "test"), ("pkg/app_test.go", "test"), ("conftest.py", "test"),
    ("src/test/java/org/AppTest.java", "test"), ("web/__tests__/app.js", "test"), ("lib/app.spec.ts", "test"),
    ("docs/usage.rst", "docs"), ("CHANGES.rst", "docs"), ("README.md", "docs"), ("vendor/x/y.go", "vendored"),
    ("package-lock.json", "lockfile"), ("Cargo.lock", "lockfile"), ("static/app.min.js", "generated"),
    ("api/v1/app.pb.go", "generated"), ("pyproject.toml", "source"),
])
def test_kind_of_a_path(path, kind):
    assert kind_of(path) == kind


def test_a_commit_whose_objects_are_missing_is_skipped_not_fatal(repo):
    fix = next(c for c in history(_git_dir(repo)) if c.message.startswith("Fix add()"))
    blob = git(repo, "rev-parse", f"{fix.sha}:calc.py").strip()
    objects = _git_dir(repo) / "objects"
    loose = objects / blob[:2] / blob[2:]
    loose.chmod(0o644)
    loose.unlink()  # a damaged mirror (or a partial clone without its promisor)
    assert _outcome(repo, fix).startswith("unreadable commit: ")
