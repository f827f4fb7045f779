"""A mined repository is an adversary (issue 35, item 1): its messages, file names and ref names are data.
No commit message forges a commit or a parent, no value it holds becomes an option of a git command
(`--output=FILE` writes FILE in diff, log, show and rev-list), and every git call of codeagent/mine/ puts
`--end-of-options` before its revisions. One test per call site."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from codeagent.cli import cli
from codeagent.data.errors import DatasetError
from codeagent.data.provenance import at_provenance
from codeagent.mine.candidates import Commit, candidate
from codeagent.mine.environment import Repository, _files, _show, setup_commit, stated_version
from codeagent.mine.mining import Options, open_repository, prepare
from codeagent.mine.walk import history
from codeagent.task import Task
from tests.support.git import git
from tests.support.history import history_repo

DATE = "2024-01-01T00:00:00Z"
ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": DATE, "GIT_COMMITTER_DATE": DATE}


def _planted(target: Path) -> list[Path]:
    """What an attack left: the target, or any file whose name starts with it (`--output=T:path`)."""
    return sorted(target.parent.glob(target.name + "*"))


def _forging_message(real: str, target: Path) -> str:
    """A message that, split on the old format's separators, is a second record: an existing commit whose
    'parent' is `--output=TARGET` (what `git diff --numstat PARENT SHA` then writes)."""
    return (f"Harmless subject\n{real} --output={target} {DATE}\n"  # a line of the listing the new format reads
            f"\x1e\n{real}\x1f--output={target}\x1f{DATE}\x1fForged")


@pytest.fixture
def hostile(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """(repository, target): a history whose newest commit's message forges a record (the current folder
    outside any repository: git would take it as the work tree of `git diff ONE-COMMIT`)."""
    monkeypatch.chdir(tmp_path)
    repo = history_repo(tmp_path)
    real = git(repo, "rev-parse", "HEAD~1").strip()
    target = tmp_path / "planted"
    (repo / "README.md").write_text("# calc, again\n")
    git(repo, "add", "README.md")
    subprocess.run(["git", "commit", "-q", "-m", _forging_message(real, target)], cwd=repo, env=ENV, check=True)
    return repo, target


def _first_parent(repo: Path) -> list[str]:
    return git(repo, "rev-list", "--first-parent", "HEAD").split()


def test_a_message_cannot_forge_a_commit_or_a_parent(hostile):
    repo, target = hostile
    commits = history(repo / ".git")
    assert [c.sha for c in commits] == _first_parent(repo)
    assert all(c.parent in ("", *_first_parent(repo)) for c in commits)
    assert "\x1e" in commits[0].message and "--output=" in commits[0].message  # the message, whole, as data
    for commit in commits:
        try:
            candidate(repo / ".git", commit)
        except Exception:  # noqa: BLE001 - skips are expected; a planted file is not
            pass
    assert _planted(target) == []


def test_a_message_with_a_nul_byte_is_read_whole(tmp_path):
    """`git commit` refuses a NUL in a message; a fetched object may hold one all the same."""
    repo = history_repo(tmp_path)
    head = git(repo, "rev-parse", "HEAD").strip()
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    raw = (f"tree {tree}\nparent {head}\nauthor t <t@t> 1704067200 +0000\ncommitter t <t@t> 1704067200 +0000\n\n"
           f"Subject\x00\n{head} --output={tmp_path}/planted {DATE}\n").encode()
    forged = subprocess.run(["git", "hash-object", "-t", "commit", "-w", "--literally", "--stdin"], cwd=repo,
                            input=raw, capture_output=True, check=True).stdout.decode().strip()
    git(repo, "update-ref", "refs/heads/main", forged)
    commits = history(repo / ".git")
    assert [c.sha for c in commits] == _first_parent(repo) and commits[0].parent == head
    assert commits[0].message.startswith("Subject\x00\n")


def test_a_message_in_another_encoding_is_decoded_by_its_header(tmp_path):
    repo = history_repo(tmp_path)
    subprocess.run(["git", "-c", "i18n.commitEncoding=latin-1", "commit", "-q", "--allow-empty", "-F", "-"], cwd=repo,
                   env=ENV, input="Café".encode("latin-1"), check=True)
    assert history(repo / ".git")[0].message == "Café"


def test_the_diff_call_sites_refuse_an_id_that_is_an_option(hostile):
    repo, target = hostile
    real = git(repo, "rev-parse", "HEAD~1").strip()
    for forged in (Commit(real, f"--output={target}", DATE, "m"), Commit(f"--output={target}", real, DATE, "m")):
        with pytest.raises(ValueError, match="not a git object id"):
            candidate(repo / ".git", forged)
    assert _planted(target) == []


def test_the_show_call_site_refuses_an_id_that_is_an_option(hostile):
    repo, target = hostile
    flask = Repository(repo / ".git", "pallets/flask", str(repo))
    with pytest.raises(ValueError, match="not a git object id"):
        stated_version(flask, f"--output={target}")
    with pytest.raises(ValueError, match="not a git object id"):
        _show(flask, f"--output={target}", "setup.py")
    assert _planted(target) == []


def test_the_rev_list_call_site_refuses_a_base_that_is_an_option(hostile):
    repo, target = hostile
    flask = Repository(repo / ".git", "pallets/flask", str(repo))
    with pytest.raises(ValueError, match="not a git object id"):
        setup_commit(flask, f"--output={target}", "1.0")
    assert _planted(target) == []


def test_a_ref_is_never_an_option(hostile, monkeypatch):
    repo, target = hostile
    with pytest.raises(RuntimeError):  # a revision git cannot find, not an option
        history(repo / ".git", f"--output={target}")
    flask = Repository(repo / ".git", "pallets/flask", str(repo))
    with pytest.raises(RuntimeError):
        setup_commit(flask, _first_parent(repo)[-1], "1.0", ref=f"--output={target}")
    assert _planted(target) == []
    # A branch may well be named like an option: it is walked as the branch it is.
    git(repo, "update-ref", "refs/heads/--output=planted", "HEAD~2")
    monkeypatch.chdir(target.parent)
    walked = history(repo / ".git", "--output=planted")
    assert [c.sha for c in walked] == _first_parent(repo)[2:]
    assert setup_commit(flask, walked[-1].sha, "9.9", ref="--output=planted") == walked[-1].sha
    assert _planted(target) == []


def test_file_names_that_look_like_options_or_hold_newlines_are_data(tmp_path, monkeypatch):
    names = {"--output=planted.py": "source", "-rf.py": "source", "tests/test_--output=x.py": "test",
             "tests/test_new\nline.py": "test", "tests/test_tab\there.py": "test", "src/caf\u00e9.py": "source"}
    repo = history_repo(tmp_path)
    for name in names:
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "odd names"], cwd=repo, env=ENV, check=True)
    monkeypatch.chdir(tmp_path)
    found = candidate(repo / ".git", history(repo / ".git")[0])
    assert sorted(found.source_files) == sorted(name for name, kind in names.items() if kind == "source")
    assert sorted(found.test_files) == sorted(name for name, kind in names.items() if kind == "test")
    listed = _files(Repository(repo / ".git", "synthetic/calc", str(repo)), history(repo / ".git")[0].sha)
    assert set(names) <= set(listed)  # -z: a newline in a name splits nothing
    assert not (tmp_path / "planted").exists() and not (tmp_path / "x.py").exists()


def test_every_git_call_of_mine_puts_end_of_options_before_its_revisions(hostile, monkeypatch):
    repo, target = hostile
    calls: list[list[str]] = []
    real_run, real_popen = subprocess.run, subprocess.Popen

    def caller_is_mine() -> bool:
        return sys._getframe(2).f_globals.get("__name__", "").startswith("codeagent.mine")

    def run(args, *rest, **kwargs):
        if caller_is_mine() and args[:1] == ["git"]:
            calls.append(list(args))
        return real_run(args, *rest, **kwargs)

    class Popen(real_popen):  # type: ignore[misc, valid-type]
        def __init__(self, args, *rest, **kwargs):
            if caller_is_mine() and list(args)[:1] == ["git"]:
                calls.append(list(args))
            super().__init__(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setattr(subprocess, "Popen", Popen)
    repository = open_repository(str(repo), "synthetic/calc")
    commits = history(repository.git_dir)
    for commit in commits:
        try:
            prepare(repository, commit, Options(), frozenset(), None, set())
        except Exception:  # noqa: BLE001 - skips
            pass
    flask = Repository(repository.git_dir, "pallets/flask", str(repo))
    stated_version(flask, commits[1].sha)
    setup_commit(flask, commits[-1].sha, "9.9")
    subcommands = {_subcommand(call) for call in calls}
    assert {"log", "cat-file", "diff", "rev-parse", "rev-list", "ls-tree"} <= subcommands
    for call in calls:
        if "--batch" in call or _subcommand(call) == "config":
            continue  # ids on stdin, checked first; a constant key
        assert "--end-of-options" in call, call
        after = call[call.index("--end-of-options") + 1:]
        revisions = after[:after.index("--")] if "--" in after else after  # then literal paths (--literal-pathspecs)
        assert all(not argument.startswith("-") for argument in revisions), call
        assert "--" not in after or "--literal-pathspecs" in call or after[-1] == "--", call
    assert _planted(target) == []


def _subcommand(call: list[str]) -> str:
    rest = call[call.index("--git-dir") + 2:]
    while rest[0] == "-c":
        rest = rest[2:]
    return rest[0]


def test_tasks_mine_on_a_hostile_repository_writes_no_host_file(hostile, tmp_path):
    repo, target = hostile
    git(repo, "reset", "-q", "--hard", "HEAD")
    # Only the forging commit and docs on top of the first: nothing to validate, no Docker needed.
    output = tmp_path / "out" / "tasks.jsonl"
    result = CliRunner().invoke(cli, ["tasks", "mine", str(repo), "--name", "synthetic/calc", "--output", str(output),
                                      "--max-commits", "1"])
    assert result.exit_code == 0, result.output
    assert _planted(target) == []
    rejects = [json.loads(line) for line in output.with_name("tasks.rejects.jsonl").read_text().splitlines()]
    assert [item["commit"] for item in rejects] == _first_parent(repo)[:1]


def test_a_mined_row_whose_commits_are_not_ids_is_refused(tmp_path):
    row = {"provenance": {"repository": str(tmp_path)}, "swebench_repo": "a/b"}
    for update in ({"base_commit": "--output=x"}, {"base_commit": "0" * 40, "environment_setup_commit": "-x"}):
        task = Task(repo="https://github.com/a/b", problem_statement="p", instance_id="a__b-1", extra=row,
                    **{"base_commit": "0" * 40, **update})
        with pytest.raises(DatasetError, match="not a git object id"):
            at_provenance(task)
    fine = Task(repo="https://github.com/a/b", problem_statement="p", instance_id="a__b-1", base_commit="a" * 40, extra=row)
    assert at_provenance(fine).repo == str(tmp_path)


def test_object_ids_are_full_hexadecimal():
    from codeagent.mine import gitread

    assert gitread.object_id("a" * 40) == "a" * 40 and gitread.object_id("b" * 64) == "b" * 64
    for bad in ("A" * 40, "a" * 39, "a" * 41, "--output=x", "", "a" * 40 + "\n", "HEAD"):
        with pytest.raises(ValueError):
            gitread.object_id(bad)
