"""Candidates from a repository's history: its first-parent commits (a merge's diff is against its first
parent, as a squash's is), each split into a gold patch (everything but tests) and a test patch
(split.py). A commit that makes no task is a `Skip` with the reason the rejects file records."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .gitread import END, SAFE_DIFF, commit_messages, git, object_id
from .split import TEST, kind_of, skip_reason

MAX_PATCH_BYTES = 1 << 20  # the whole diff, tests included
MAX_FILES = 50


class Skip(Exception):
    """A commit that makes no task; str(): why."""


@dataclass(frozen=True)
class Commit:
    sha: str
    parent: str  # the first parent ('' none: a root commit, or the edge of a shallow clone)
    date: str  # committer date, ISO 8601
    message: str


@dataclass(frozen=True)
class Limits:
    max_patch_bytes: int = MAX_PATCH_BYTES
    max_files: int = MAX_FILES


@dataclass
class Candidate:
    commit: Commit
    gold_patch: str
    test_patch: str
    test_files: list[str] = field(default_factory=list)
    source_files: list[str] = field(default_factory=list)


def history(git_dir: Path, ref: str = "HEAD", *, since: str | None = None, until: str | None = None,
            max_commits: int | None = None) -> list[Commit]:
    """The first-parent commits of `ref`, newest first, within the dates and the count given. The ids and
    dates come from a listing of fields git writes itself, the messages from `commit_messages` (gitread.py):
    a message cannot forge a commit, a parent or a date."""
    args = ["log", "--first-parent", "--format=%H %P %cI"]
    if since:
        args.append(f"--since={since}")
    if until:
        args.append(f"--until={until}")
    if max_commits:
        args.append(f"--max-count={max_commits}")
    listed = []
    for line in git(git_dir, *args, END, ref, "--").splitlines():
        sha, *parents, date = line.split(" ")
        parents = [object_id(parent) for parent in parents if parent]
        datetime.fromisoformat(date.replace("Z", "+00:00"))  # a ValueError, were it not git's date
        listed.append((object_id(sha), parents[0] if parents else "", date))
    messages = commit_messages(git_dir, [sha for sha, _, _ in listed])
    return [Commit(sha, parent, date, messages[sha].strip()) for sha, parent, date in listed]


def shallow_edges(git_dir: Path) -> set[str]:
    """The commits whose parents a shallow clone lacks."""
    shallow = Path(git_dir) / "shallow"
    return set(shallow.read_text().split()) if shallow.is_file() else set()


def candidate(git_dir: Path, commit: Commit, limits: Limits = Limits(), shallow: frozenset[str] = frozenset()) -> Candidate:
    """The commit split into gold and test patches, or Skip with the reason."""
    if not commit.parent:
        raise Skip("shallow clone: the parent is not here" if commit.sha in shallow else "root commit (no parent)")
    try:
        changed = _numstat(git_dir, commit)
    except RuntimeError as error:  # objects missing (a partial clone, a damaged mirror): this commit only
        raise Skip(f"unreadable commit: {str(error).splitlines()[-1][-200:]}") from None
    if not changed:
        raise Skip("empty diff")
    binary = [path for path, is_binary in changed if is_binary]
    kinds = {path: kind_of(path) for path, _ in changed}
    if reason := skip_reason(kinds):
        raise Skip(reason)
    if binary:
        raise Skip(f"binary file changed: {binary[0]}")
    if len(changed) > limits.max_files:
        raise Skip(f"oversized: {len(changed)} files changed (more than {limits.max_files})")
    data = _diff(git_dir, commit, limits.max_patch_bytes)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Skip("non-UTF-8 patch") from None
    chunks = [chunk for chunk in re.split(r"(?m)^(?=diff --git )", text) if chunk]
    if len(chunks) != len(changed):
        raise Skip(f"unreadable diff ({len(chunks)} file diffs for {len(changed)} files)")
    if any(re.search(r"(?m)^[-+]Subproject commit ", chunk) for chunk in chunks):
        raise Skip("submodule change")
    tests = [path for path, _ in changed if kinds[path] == TEST]
    gold = "".join(chunk for (path, _), chunk in zip(changed, chunks) if kinds[path] != TEST)
    test_patch = "".join(chunk for (path, _), chunk in zip(changed, chunks) if kinds[path] == TEST)
    sources = [path for path, _ in changed if kinds[path] != TEST]
    return Candidate(commit, gold, test_patch, tests, sources)


def _numstat(git_dir: Path, commit: Commit) -> list[tuple[str, bool]]:
    """(path, binary) of each file the commit changes, in git's order (the diff's order)."""
    out = git(git_dir, "diff", "--numstat", "-z", "--no-renames", *SAFE_DIFF, END, *_revisions(commit))
    changed = []
    for entry in out.split("\0"):
        if not entry:
            continue
        added, _deleted, path = entry.split("\t", 2)
        changed.append((path, added == "-"))
    return changed


def _revisions(commit: Commit) -> tuple[str, str]:
    """The parent and the commit, each checked as an object id (a Commit may come from a rows file)."""
    return object_id(commit.parent), object_id(commit.sha)


def _diff(git_dir: Path, commit: Commit, limit: int) -> bytes:
    """The commit's diff, read no further than `limit` bytes (Skip beyond: a 100 MB diff is not read whole)."""
    command = ["git", "--git-dir", str(git_dir), "-c", "core.quotepath=false", "diff", "--no-color", *SAFE_DIFF,
               "--no-renames", "--full-index", END, *_revisions(commit)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        assert proc.stdout is not None
        data = proc.stdout.read(limit + 1)
        if len(data) > limit:
            proc.kill()
            raise Skip(f"oversized: the diff is over {limit} bytes")
        proc.wait()
    if proc.returncode != 0:
        raise Skip(f"git diff failed for {commit.sha[:12]}")
    return data
