"""Candidates from a repository's history: its units (walk.py: a pull request where the history shows one,
else a commit), each split into a gold patch (the source it changes), a test patch (its tests) and what
is neither (split.py): docs and changelogs and vendored trees are dropped, lockfiles and generated files
held aside (validation adds them back only when the tests cannot pass without them). A unit that makes no
task is a `Skip` with the reason the rejects file records."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from .gitread import END, SAFE_DIFF, git, object_id
from .split import DROPPED, HELD, SOURCE, TEST, kind_of, skip_reason

MAX_PATCH_BYTES = 1 << 20  # the whole diff, tests included
MAX_FILES = 50
# A diff whose source files lie in more areas than this (top folders; under src/, lib/... the next one),
# when it changes more than MIN_SPREAD_FILES of them, is not one change: a sync, a sweep, a release.
MAX_AREAS, MIN_SPREAD_FILES = 4, 12
COMMIT, PULL, BRANCH = "commit", "pull", "branch"  # a unit's kind (walk.py)
_NESTING = frozenset({"src", "lib", "pkg", "packages", "internal", "cmd", "source", "modules"})


class Skip(Exception):
    """A commit that makes no task; str(): why."""


@dataclass(frozen=True)
class Commit:
    sha: str  # the unit's commit (a merge: the merge)
    parent: str  # the base ('' none: a root commit, or the edge of a shallow clone); a pull request: the line it merged
    # into as it stood when the pull request was opened (walk.py)
    date: str  # committer date, ISO 8601
    message: str
    head: str = ""  # the state with the change ('' the commit itself; a pull request: its branch's head)
    kind: str = COMMIT  # COMMIT, PULL (a pull request's merge), BRANCH (a long-lived branch's merge: no task)
    line: str = ""  # the branch merge whose line holds this unit ('' the walked ref's own line)
    start: str = ""  # where the change's diff starts when not at `parent` (a pull request: its merge base)


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
    held_patch: str = ""  # lockfiles and generated files: added to the gold patch only if the tests need them
    held_files: list[str] = field(default_factory=list)
    dropped_files: list[str] = field(default_factory=list)  # docs, changelogs, vendored trees: never in a task


def shallow_edges(git_dir: Path) -> set[str]:
    """The commits whose parents a shallow clone lacks."""
    shallow = Path(git_dir) / "shallow"
    return set(shallow.read_text().split()) if shallow.is_file() else set()


def candidate(git_dir: Path, commit: Commit, limits: Limits = Limits(), shallow: frozenset[str] = frozenset()) -> Candidate:
    """The unit split into gold, test and held patches, or Skip with the reason."""
    if commit.kind == BRANCH:
        raise Skip(f"branch merge: {_subject(commit.message)!r} (a long-lived branch: its own commits are units)")
    if not commit.parent:
        raise Skip("shallow clone: the parent is not here" if commit.sha in shallow else "root commit (no parent)")
    try:
        changed = _numstat(git_dir, commit)
    except RuntimeError as error:  # objects missing (a partial clone, a damaged mirror): this commit only
        raise Skip(f"unreadable commit: {str(error).splitlines()[-1][-200:]}") from None
    if not changed:
        raise Skip("empty diff")
    kinds = {path: kind_of(path) for path, _ in changed}
    if reason := skip_reason(kinds):
        raise Skip(reason)
    kept = [(path, is_binary) for path, is_binary in changed if kinds[path] not in DROPPED]
    if binary := [path for path, is_binary in kept if is_binary]:
        raise Skip(f"binary file changed: {binary[0]}")
    if len(kept) > limits.max_files:
        raise Skip(f"oversized: {len(kept)} files changed (more than {limits.max_files})")
    sources = [path for path, _ in kept if kinds[path] == SOURCE]
    if reason := spread(sources):
        raise Skip(reason)
    data = _diff(git_dir, commit, limits.max_patch_bytes, [path for path, _ in kept])
    chunks = [chunk for chunk in re.split(rb"(?m)^(?=diff --git )", data) if chunk]
    if len(chunks) != len(kept):
        raise Skip(f"unreadable diff ({len(chunks)} file diffs for {len(kept)} files)")
    parts: dict[str, list[str]] = {TEST: [], SOURCE: [], HELD: []}
    for (path, _), chunk in zip(kept, chunks):
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError:
            raise Skip(f"non-UTF-8 patch: {path}") from None
        if re.search(r"(?m)^[-+]Subproject commit ", text):
            raise Skip("submodule change")
        parts[kinds[path] if kinds[path] in (TEST, SOURCE) else HELD].append(text)
    if commit.start and not _applies(git_dir, commit.parent, "".join(chunk.decode() for chunk in chunks)):
        commit = replace(commit, parent=commit.start, start="")  # not at the later base: from the merge base
    return Candidate(commit, "".join(parts[SOURCE]), "".join(parts[TEST]),
                     [path for path, _ in kept if kinds[path] == TEST], sources, "".join(parts[HELD]),
                     [path for path, _ in kept if kinds[path] not in (TEST, SOURCE)],
                     [path for path, _ in changed if kinds[path] in DROPPED])


def _applies(git_dir: Path, base: str, patch: str) -> bool:
    """Does the patch apply to the tree of `base` (checked in an index of its own: nothing is written)?"""
    with tempfile.TemporaryDirectory(prefix="codeagent-mine-") as scratch:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(scratch) / "index")}
        run = functools.partial(subprocess.run, capture_output=True, env=env)
        if run(["git", "--git-dir", str(git_dir), "read-tree", END, object_id(base)]).returncode != 0:
            return False
        return run(["git", "--git-dir", str(git_dir), "apply", "--cached", "--check", END, "-"],
                   input=patch.encode()).returncode == 0


def spread(sources: list[str]) -> str | None:
    """Why a diff whose source files lie in many unrelated areas is no task (None: it is one change)."""
    areas = sorted({area_of(path) for path in sources})
    if len(sources) > MIN_SPREAD_FILES and len(areas) > MAX_AREAS:
        return (f"spans unrelated areas: {len(sources)} source files in {len(areas)} areas "
                f"({', '.join(areas[:6])}{', ...' if len(areas) > 6 else ''})")
    return None


def area_of(path: str) -> str:
    """The area of a path: its top folder (under src/, lib/, pkg/...: the folder below it); '.' at the top."""
    folders = PurePosixPath(path).parts[:-1]
    if not folders:
        return "."
    return "/".join(folders[:2]) if folders[0] in _NESTING and len(folders) > 1 else folders[0]


def _subject(message: str) -> str:
    return message.strip().split("\n", 1)[0][:120]


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
    """Where the change starts and the state with the change, each checked as an object id."""
    return object_id(commit.start or commit.parent), object_id(commit.head or commit.sha)


def _diff(git_dir: Path, commit: Commit, limit: int, paths: list[str]) -> bytes:
    """The diff of `paths` (literal paths, no pathspec magic), read no further than `limit` bytes (Skip
    beyond: a 100 MB diff is not read whole)."""
    command = ["git", "--git-dir", str(git_dir), "--literal-pathspecs", "-c", "core.quotepath=false", "diff",
               "--no-color", *SAFE_DIFF, "--no-renames", "--full-index", END, *_revisions(commit), "--", *paths]
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
