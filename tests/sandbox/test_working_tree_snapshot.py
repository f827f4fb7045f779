"""The working-tree snapshot on its own (no Docker): what it takes and leaves out, that the user's .git is
not written, that links out of the repository stay links, that it is deterministic and found again."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time

import pytest

from codeagent.sandbox import WorkspaceError, snapshot
from codeagent.sandbox import working_tree as wt
from codeagent.sandbox.workspace import host_tree
from tests.support.git import git


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))


def tree_of(snap) -> dict[str, tuple[str, bytes]]:
    out = subprocess.run(["git", "--git-dir", str(snap.git_dir), "ls-tree", "-r", "-z", snap.commit],
                         capture_output=True, check=True).stdout.decode()
    files = {}
    for record in filter(None, out.split("\0")):
        meta, path = record.split("\t", 1)
        mode, _, sha = meta.split()
        blob = subprocess.run(["git", "--git-dir", str(snap.git_dir), "cat-file", "blob", sha], capture_output=True,
                              check=True).stdout
        files[path] = (mode, blob)
    return files


def dot_git(repo):
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((repo / ".git").rglob("*")) if p.is_file()}


def test_links_out_of_the_repository_stay_links_and_dot_git_is_not_written(make_repo, tmp_path, monkeypatch):
    repo = make_repo({"src/app.py": "x = 1\n", "keep.txt": "keep\n"})
    host = tmp_path / "host"
    host.mkdir()
    (host / "app.py").write_text("HOST-SECRET\n")
    (repo / "src" / "app.py").unlink()
    (repo / "src").rmdir()
    os.symlink(host, repo / "src")  # a tracked folder replaced by a link to a host folder
    os.symlink(host / "app.py", repo / "file-link")
    (repo / "big.bin").write_bytes(b"\0" * 2048)
    monkeypatch.setattr(wt, "UNTRACKED_FILE_MAX", 1024)
    before = dot_git(repo)
    snap = snapshot(repo, working_tree=True)
    files = tree_of(snap)
    assert files["src"] == ("120000", str(host).encode()) and files["file-link"][0] == "120000"
    assert "src/app.py" not in files and "big.bin" not in files and files["keep.txt"] == ("100644", b"keep\n")
    assert not any(b"HOST-SECRET" in blob for _, blob in files.values())
    assert snap.working_tree.skipped == ("big.bin",) and "left out 1 untracked file(s)" in snap.note
    assert sorted(os.listdir(host_tree(snap))) == ["keep.txt"]  # links are never extracted on the host
    assert dot_git(repo) == before
    assert not str(snap.git_dir).startswith(str(repo))


def test_the_same_files_give_the_same_commit_and_it_resolves_again(make_repo):
    repo = make_repo({"a.txt": "a\n"})
    (repo / "a.txt").write_text("edited\n")
    first, second = snapshot(repo, working_tree=True), snapshot(repo, working_tree=True)
    assert first.commit == second.commit and first.working_tree.changed == ("a.txt",)
    again = snapshot(repo, first.commit)  # a resumed session's base
    assert again.commit == first.commit and again.working_tree.base == git(repo, "rev-parse", "HEAD").strip()
    assert snapshot(repo).commit == git(repo, "rev-parse", "HEAD").strip()  # without working_tree: HEAD, as before


def test_an_edit_of_the_same_size_in_the_second_the_index_was_written_is_taken(make_repo):
    # git compares stat times in whole seconds: the copy of the user's index must keep the index's time,
    # or git takes such a file for unchanged (as the sandbox's diff once lost a subagent's edit)
    repo = make_repo({"a.txt": "base\n"})
    while time.time() % 1 > 0.3:
        time.sleep(0.02)
    os.utime(repo / "a.txt")
    git(repo, "update-index", "-q", "--refresh")
    (repo / "a.txt").write_text("mine\n")
    assert int((repo / ".git" / "index").stat().st_mtime) == int((repo / "a.txt").stat().st_mtime)
    time.sleep(1.1)
    snap = snapshot(repo, working_tree=True)
    assert tree_of(snap)["a.txt"] == ("100644", b"mine\n") and snap.working_tree.changed == ("a.txt",)


def test_a_repository_with_no_commit_yet(tmp_path):
    repo = tmp_path / "fresh"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.py").write_text("a\n")
    snap = snapshot(repo, working_tree=True)
    assert set(tree_of(snap)) == {"a.py"} and snap.note == "started from the working tree (1 file; no commit yet)"


def test_a_folder_outside_git(tmp_path, monkeypatch):
    folder = tmp_path / "plain"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.py").write_text("a\n")
    (folder / ".gitignore").write_text("*.log\n")
    (folder / "x.log").write_text("log\n")
    snap = snapshot(folder, working_tree=True)
    assert set(tree_of(snap)) == {".gitignore", "sub/a.py"} and snap.working_tree.base is None
    assert "is not a git repository: started from a snapshot of the folder (2 files" in snap.note
    assert not (folder / ".git").exists()
    with pytest.raises(WorkspaceError, match="is not a git repository"):
        snapshot(folder)  # at a commit: still needs git
    monkeypatch.setattr(wt, "FOLDER_FILES_MAX", 1)
    with pytest.raises(WorkspaceError, match="holds 2 files"):
        snapshot(folder, working_tree=True)
