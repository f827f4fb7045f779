"""Every git call codeagent makes on this machine (outside mine/, which has its own tests), fed what a hostile
dataset, repository or model can give it: a commit that is an option (`--output=F` makes `git log`, `git show`
and `git archive` write F), file names that are options, hold newlines, tabs, quotes or non-ASCII letters, and
commit messages with git's field separators. No call writes a file, and listings read names NUL-separated."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from codeagent.git_args import GitArgumentError, end_of_options, git_version, object_id, revision
from codeagent.sandbox.errors import WorkspaceError
from tests.support.git import git

HOSTILE_NAMES = {"--output=x.py": "a = 1\n", "-rf": "b\n", "new\nline.py": "c\n", "tab\there.py": "d\n",
                 '"quoted".py': "e\n", "tests/test_ünï.py": "import pkg.mod\n", "pkg/mod.py": "x = 1\n",
                 "pkg/__init__.py": ""}


@pytest.fixture
def hostile(make_repo, tmp_path, monkeypatch):
    """A repository with hostile file names and a commit message full of separators; the folder `outside`
    is where an option-shaped value would make git write."""
    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))
    repo = make_repo(HOSTILE_NAMES)
    (repo / "more.py").write_text("f\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "subject\x1e\x1f--output=/tmp/x\x1e\n\n-body\x1f")
    outside = tmp_path / "outside"
    outside.mkdir()
    return repo, outside


def option(outside: Path) -> str:
    return f"--output={outside}/written"


def nothing_written(outside: Path) -> bool:
    return os.listdir(outside) == []


def test_the_helpers_refuse_what_git_would_read_as_an_option():
    assert object_id("0123abcd") == "0123abcd" and revision("v1.2^{commit}") == "v1.2^{commit}"
    for bad in ("--output=x", "-n", "HEAD", "abc", "0123ABCD", "", "0123abcd\n"):
        with pytest.raises(GitArgumentError):
            object_id(bad)
    for bad in ("--output=x", "-", "", "main\nx", "a\x00b", "a\x1fb"):
        with pytest.raises(GitArgumentError):
            revision(bad)
    assert git_version() >= (2, 0)
    assert end_of_options() == (["--end-of-options"] if git_version() >= (2, 24) else [])
    assert end_of_options("rev-parse") == (["--end-of-options"] if git_version() >= (2, 30) else [])


def test_an_older_git_gets_no_end_of_options_and_the_checks_still_hold(monkeypatch):
    import codeagent.git_args as git_args

    monkeypatch.setattr(git_args, "git_version", lambda: (2, 20, 1))  # Debian buster's
    assert git_args.end_of_options() == [] and git_args.end_of_options("rev-parse") == []
    monkeypatch.setattr(git_args, "git_version", lambda: (2, 25))
    assert git_args.end_of_options() == ["--end-of-options"] and git_args.end_of_options("rev-parse") == []


def test_snapshot_refuses_a_commit_that_is_an_option_even_with_a_working_tree_store(hostile):
    """On 0972c8d a working-tree store made `git log -1 --format=%s <commit>` run with the dataset's commit:
    `--output=F` wrote F."""
    from codeagent.sandbox.workspace import snapshot

    repo, outside = hostile
    taken = snapshot(repo, working_tree=True)  # makes codeagent's store for this repository
    assert taken.working_tree is not None
    with pytest.raises(WorkspaceError) as refused:
        snapshot(repo, option(outside))
    assert nothing_written(outside)
    assert "is not a revision" in str(refused.value)
    assert snapshot(repo, "HEAD~1").commit == git(repo, "rev-parse", "HEAD~1").strip()  # a plain revision still works
    assert snapshot(repo, "").commit == git(repo, "rev-parse", "HEAD").strip()  # "" is HEAD, as before


def test_a_working_tree_snapshot_of_hostile_names_keeps_every_name(hostile):
    from codeagent.sandbox.working_tree import is_working_tree_commit
    from codeagent.sandbox.workspace import snapshot, working_tree_store

    repo, outside = hostile
    (repo / "-n").write_text("untracked\n")
    (repo / "new\nline.py").write_text("changed\n")
    taken = snapshot(repo, working_tree=True)
    assert set(taken.working_tree.changed) == {"-n", "new\nline.py"}
    store = working_tree_store(repo)
    assert is_working_tree_commit(store, taken.commit)
    assert not is_working_tree_commit(store, option(outside)) and not is_working_tree_commit(store, "")
    assert nothing_written(outside)


def test_the_git_readers_take_only_object_ids_and_read_hostile_paths(hostile):
    """On 0972c8d `git show <commit>:<path>` with a dataset's commit `--output=F` wrote `F:<path>`."""
    from codeagent.patches.base import git_reader as patch_reader
    from codeagent.sandbox.workspace import git_reader, snapshot

    repo, outside = hostile
    snap = snapshot(repo)
    for reader in (git_reader, patch_reader):
        assert reader(snap.git_dir, snap.commit)("--output=x.py") == b"a = 1\n"
        assert reader(snap.git_dir, snap.commit)("new\nline.py") == b"c\n"
        with pytest.raises(GitArgumentError):
            reader(snap.git_dir, option(outside))("more.py")
    assert nothing_written(outside)


def test_write_tar_takes_only_an_object_id(hostile, tmp_path):
    from dataclasses import replace

    from codeagent.sandbox.workspace import snapshot

    repo, outside = hostile
    snap = snapshot(repo)
    with pytest.raises(GitArgumentError):
        replace(snap, commit=option(outside)).write_tar(tmp_path / "tree.tar")  # `git archive --output=F`
    assert nothing_written(outside)
    snap.write_tar(tmp_path / "tree.tar")
    listed = subprocess.run(["tar", "-tf", str(tmp_path / "tree.tar")], capture_output=True, text=True).stdout
    assert "--output=x.py" in listed and "-rf" in listed


def test_the_requirements_reader_refuses_a_dataset_commit_that_is_an_option(hostile):
    """environment_setup_commit comes from the dataset: on 0972c8d `--output=F` wrote `F:requirements.txt`."""
    from codeagent.harness.layers.python_env import _reader
    from codeagent.sandbox.workspace import snapshot

    repo, outside = hostile
    snap = snapshot(repo)
    with pytest.raises(GitArgumentError):
        _reader(snap, option(outside))("requirements.txt")
    assert nothing_written(outside)
    assert _reader(snap, None)("--output=x.py") == "a = 1\n"
    assert _reader(snap, snap.commit)("tab\there.py") == "d\n"


def test_listings_read_names_nul_separated(hostile):
    """Non-ASCII, newline and tab names came back quoted from `ls-tree`/`grep` without -z (0972c8d: the test
    file `tests/test_ünï.py` was never found)."""
    from codeagent.harness.toolchain.detect import RepoFiles
    from codeagent.sandbox.workspace import snapshot
    from codeagent.scaling.relevant_tests import discover_test_files
    from codeagent.scaling.test_command import detect_in_git

    repo, outside = hostile
    snap = snapshot(repo)
    files = RepoFiles(snap)  # what the toolchain's detection reads
    assert {"--output=x.py", "-rf", "new\nline.py", "tab\there.py", '"quoted".py', "tests"} <= files.top
    assert "tests/test_ünï.py" in files.names("tests")
    assert files.read("-rf") == b"b\n"
    assert discover_test_files(snap.git_dir, snap.commit, ["pkg/mod.py"]) == ["tests/test_ünï.py"]
    assert detect_in_git(str(snap.git_dir), snap.commit) is not None  # pytest, for the test file
    for call in (lambda: discover_test_files(snap.git_dir, option(outside), ["pkg/mod.py"]),
                 lambda: detect_in_git(str(snap.git_dir), option(outside))):
        with pytest.raises(GitArgumentError):
            call()
    assert nothing_written(outside)


def test_mentions_list_hostile_names_and_take_only_an_object_id(hostile):
    from codeagent.run.session.mentions import RepoFiles
    from codeagent.sandbox.workspace import snapshot

    repo, outside = hostile
    snap = snapshot(repo)
    files = RepoFiles.load(snap.git_dir, snap.commit)
    assert {"--output=x.py", "-rf", "new\nline.py", "tests/test_ünï.py"} <= set(files.paths)
    assert files.read("-rf") == "b\n"
    with pytest.raises(GitArgumentError):
        RepoFiles.load(snap.git_dir, option(outside))
    assert nothing_written(outside)


def test_a_devcontainer_that_names_options_reads_nothing_as_an_option(make_repo, tmp_path):
    from codeagent.harness.layers.devcontainer import DevcontainerError, find, load, prepare
    from codeagent.sandbox.workspace import snapshot

    outside = tmp_path / "outside"
    outside.mkdir()
    config = json.dumps({"build": {"dockerfile": option(outside), "context": option(outside)}})
    repo = make_repo({".devcontainer/devcontainer.json": config, "-rf": "x\n"})
    snap = snapshot(repo)
    path = find(snap)
    assert path == ".devcontainer/devcontainer.json"
    with pytest.raises(DevcontainerError, match="is not in the repository"):
        prepare(load(snap, path), snap, build=False)
    assert nothing_written(outside)


def test_apply_writes_a_patch_of_hostile_names_and_nothing_else(hostile):
    from codeagent.run.apply import apply_patch

    repo, outside = hostile
    patch = ("diff --git a/-rf b/-rf\n--- a/-rf\n+++ b/-rf\n@@ -1 +1 @@\n-b\n+B\n"
             "diff --git a/--output=x.py b/--output=x.py\n--- a/--output=x.py\n+++ b/--output=x.py\n"
             "@@ -1 +1 @@\n-a = 1\n+a = 2\n")
    outcome = apply_patch(repo, patch)
    assert outcome.applied, outcome.message
    assert (repo / "-rf").read_text() == "B\n" and (repo / "--output=x.py").read_text() == "a = 2\n"
    assert nothing_written(outside)
    assert sorted(os.listdir(repo)) == sorted({".git", "more.py", *(name.split("/")[0] for name in HOSTILE_NAMES)})


def test_a_clone_source_that_looks_like_an_option_is_a_repository_to_git(tmp_path, monkeypatch):
    """`user@host:path` sources reach `git clone`: `-u<cmd>@x:y` read as `--upload-pack` on 0972c8d."""
    from codeagent.sandbox.errors import CloneFailed
    from codeagent.sandbox.workspace import snapshot

    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))
    with pytest.raises(CloneFailed) as failed:
        snapshot("-utouch@x:y")
    assert "upload-pack" not in str(failed.value)


def test_git_variables_of_a_hook_or_bisect_never_point_codeagent_at_another_repository(make_repo, tmp_path):
    """Run from a git hook, `git bisect run` or `git rebase -x`, the environment holds GIT_DIR (and GIT_WORK_TREE):
    every git command obeys it over `-C repo`. On 0972c8d `sandbox run --repo R` read the other repository's HEAD
    and committed "codeagent base" into it."""
    import sys

    repo = make_repo({"a.txt": "mine\n"})
    other = make_repo({"a.txt": "other\n"})
    before = git(other, "log", "--format=%H %s", "--all")
    env = {**os.environ, "GIT_DIR": str(other / ".git"), "GIT_WORK_TREE": str(other),
           "GIT_INDEX_FILE": str(other / ".git" / "index"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "sandbox", "run", "--kind", "local", "--repo",
                           str(repo), "cat", "a.txt"], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("mine"), proc.stdout + proc.stderr
    assert git(other, "log", "--format=%H %s", "--all") == before
    assert git(other, "status", "--porcelain") == ""
