"""Turn a repository (local checkout, local mirror or URL) at a commit, or a local working tree as
the user sees it (working_tree.py), into a tree to copy.

Only git's object store is read at a commit; a working tree is read through a temporary index into
codeagent's own object store: the user's index, refs and files are never touched.
Inside a sandbox the tree becomes a fresh one-commit repository tagged `codeagent-base`, so
`diff()` is the agent's change and no later history can leak into the task.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..git_args import GitArgumentError, end_of_options, object_id, revision
from . import tree_cache
from .errors import CloneFailed, WorkspaceError
from .working_tree import (
    WorkingTree,
    common_objects,
    describe,
    is_working_tree_commit,
    note,
    open_store,
    snapshot_working_tree,
    store_name,
)

BASE_TAG = "codeagent-base"
URL_PATTERN = re.compile(r"^(https?|ssh|git|file)://|^[\w.-]+@[\w.-]+:")

# Untracked build debris that never belongs in a patch (the repository's own .gitignore adds more).
IGNORED_DEBRIS = ("__pycache__/", "*.py[co]", ".pytest_cache/", "*.egg-info/", ".mypy_cache/", ".tox/")

# What an environment image installed in the workdir before the tree came (node_modules/, target/): git
# exclude lines, kept out of the base commit and of every diff (harness/toolchain/deps.py writes it).
INSTALLED = "/etc/codeagent/installed"
# What an environment image says of itself for the agent's prompt: its toolchains, how its dependencies
# were installed, the repository's test command (written by the harness, never by the repository's code).
ENVIRONMENT_NOTE = "/etc/codeagent/environment.md"
MAX_NOTE = 4000
# What an image's build step compiled from: `git ls-files -s` of its tree (mode, blob, path), the file's
# time set to when the build started (harness/toolchain/deps.py writes it).
BUILT_FROM = "/etc/codeagent/built-from"
# Run inside the copied tree: make it a repository whose only commit is the task's base. On an image that
# installed or built in the workdir, the tree's files are then made newer than what was built (a compiler
# that goes by times rebuilds them), except the files the build compiled exactly as they are here: those
# get the build's start time, older than its outputs, so the first build in a sandbox or a graded run
# compiles only what differs. A path git quotes is left newer (rebuilt: the safe side). The index is
# refreshed after.
INIT_REPO_SCRIPT = (
    f"git init -q && {{ [ ! -f {INSTALLED} ] || cat {INSTALLED} >> .git/info/exclude; }} && "
    "git config gc.auto 0 && git config core.fileMode true && "
    "git add -A && git -c user.name=codeagent -c user.email=codeagent@localhost "
    "commit -q --no-verify --allow-empty -m \"codeagent base: $1\" && git tag " + BASE_TAG + " && "
    f"printf '%s\\n' {' '.join(repr(p) for p in IGNORED_DEBRIS)} >> .git/info/exclude && "
    f"{{ [ ! -f {INSTALLED} ] || {{ git ls-files -z | xargs -0 -r touch -c -h -- && "
    f"{{ [ ! -f {BUILT_FROM} ] || git -c core.quotePath=false ls-files -s | grep -Fx -f {BUILT_FROM} | cut -f2- "
    f"| tr '\\n' '\\0' | xargs -0 -r touch -c -h -r {BUILT_FROM} --; }} && git update-index -q --refresh; }}; }}"
)
# Part of every prepared workspace's cache key, so a changed recipe prepares anew.
WORKSPACE_RECIPE = hashlib.sha256(INIT_REPO_SCRIPT.encode()).hexdigest()[:8]


def cache_dir() -> Path:
    root = os.environ.get("CODEAGENT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "codeagent"
    )
    return Path(root)


@dataclass(frozen=True)
class RepoSnapshot:
    """A repository's tree at one commit, ready to be copied into sandboxes."""

    git_dir: Path
    commit: str  # full sha
    tree: str  # tree sha: equal trees share one prepared workspace
    source: str
    working_tree: WorkingTree | None = None  # set when the commit is a snapshot of the user's working tree

    @property
    def note(self) -> str | None:
        """One line on where a run starts from, for a working-tree snapshot (None otherwise)."""
        return note(self.source, self.working_tree) if self.working_tree is not None else None

    def write_tar(self, destination: Path, prefix: str = "") -> None:
        """`git archive` of the commit into destination, its paths under `prefix` (raises
        WorkspaceError on disk full). A container copy names the workdir as prefix and extracts at
        /: the engine refuses a link that points above the folder it extracts into, and a
        repository may hold one (`docs -> ../common`); at / every link stays inside."""
        prefix_option = [f"--prefix={prefix.strip('/')}/"] if prefix.strip("/") else []
        try:
            with open(destination, "wb") as out:
                proc = subprocess.run(
                    ["git", "--git-dir", str(self.git_dir), "archive", "--format=tar", *prefix_option,
                     *end_of_options(), object_id(self.commit, "commit")],
                    stdout=out, stderr=subprocess.PIPE,
                )
        except OSError as exc:
            raise _disk_error(exc, destination) from exc
        if proc.returncode != 0:
            message = proc.stderr.decode(errors="replace").strip()
            if "No space left" in message:
                raise WorkspaceError(f"disk full while copying {self.source} to {destination.parent}: "
                                     "free some space (or point CODEAGENT_CACHE/TMPDIR elsewhere)")
            raise WorkspaceError(f"git archive of {self.source} at {self.commit[:12]} failed: {message}")


def snapshot(source: str | os.PathLike, commit: str | None = None, *, working_tree: bool = False) -> RepoSnapshot:
    """Resolve a repository and a commit (default: HEAD) to a RepoSnapshot, or raise WorkspaceError.
    With `working_tree` and no commit, a local checkout is taken as the user sees it (uncommitted
    edits and untracked files that are not ignored), and a folder outside git as its files; the
    commit such a snapshot made resolves again later (a resumed session finds the same base)."""
    source = str(source)
    if commit:
        try:
            revision(commit, "commit")
        except GitArgumentError as exc:
            raise WorkspaceError(f"{exc}: give the commit's sha (or a branch or tag name)") from None
    if URL_PATTERN.match(source):
        git_dir = _mirror_url(source, commit)
    else:
        location = _local_dir(source)
        git_dir, top = _local_git_dir(location)
        if working_tree and commit is None and top is not None:
            store, taken = snapshot_working_tree(top, git_dir, _store_path(top), IGNORED_DEBRIS)
            return RepoSnapshot(git_dir=store, commit=taken.commit, tree=taken.tree, source=source, working_tree=taken)
        if commit is not None and (git_dir is None or not _has_commit(git_dir, commit)):
            store = working_tree_store(top or location)
            if store is not None and is_working_tree_commit(store, commit):
                full = _git(store, "rev-parse", "--verify", *end_of_options("rev-parse"), f"{commit}^{{commit}}").strip()
                taken = describe(store, full)
                return RepoSnapshot(git_dir=store, commit=full, tree=taken.tree, source=source, working_tree=taken)
        if git_dir is None:
            raise WorkspaceError(f"{source} is not a git repository (run `git init` there and commit, "
                                 "or point --repo at a checkout)")
    full = _resolve_commit(git_dir, commit or "HEAD", source)
    tree = _git(git_dir, "rev-parse", "--verify", *end_of_options("rev-parse"), f"{object_id(full, 'commit')}^{{tree}}").strip()
    return RepoSnapshot(git_dir=git_dir, commit=full, tree=tree, source=source)


def working_tree_store(top: str | Path) -> Path | None:
    """codeagent's object store for the working tree at `top`, if a snapshot of it was taken."""
    top = Path(top).resolve()
    if not (_store_path(top) / "objects").is_dir():
        return None
    inside = subprocess.run(["git", "-C", str(top), "rev-parse", "--show-toplevel"], capture_output=True).returncode == 0
    return open_store(_store_path(top), top, common_objects(top) if inside else None)


def _store_path(top: Path) -> Path:
    return cache_dir() / "working-trees" / store_name(top)


def _local_dir(path: str) -> Path:
    location = Path(path).expanduser()
    if not location.exists():
        raise WorkspaceError(f"repository path {path} does not exist")
    if not location.is_dir():
        raise WorkspaceError(f"repository path {path} is a file, not a directory")
    return location


def _local_git_dir(location: Path) -> tuple[Path | None, Path | None]:
    """The repository's git dir and its working tree's top (None when bare); (None, the folder) outside git."""
    proc = subprocess.run(["git", "-C", str(location), "rev-parse", "--absolute-git-dir", "--show-toplevel"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        bare = subprocess.run(["git", "-C", str(location), "rev-parse", "--absolute-git-dir"],
                              capture_output=True, text=True)
        if bare.returncode == 0:
            return Path(bare.stdout.strip()), None
        return None, location.resolve()
    lines = proc.stdout.strip().split("\n")
    return Path(lines[0]), (Path(lines[1]) if len(lines) > 1 and lines[1] else None)


def _mirror_url(url: str, commit: str | None) -> Path:
    """Clone a URL once into the cache as a bare mirror; fetch again when the commit is missing."""
    name = re.sub(r"[^\w.-]+", "_", url.rstrip("/").split("/")[-1]) or "repo"
    mirror = cache_dir() / "repos" / f"{name}-{hashlib.sha256(url.encode()).hexdigest()[:10]}.git"
    if not mirror.exists():
        mirror.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=mirror.parent) as tmp:
            proc = subprocess.run(["git", "clone", "--quiet", "--mirror", "--", url, f"{tmp}/m.git"],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise CloneFailed(f"could not clone {url}: {proc.stderr.strip()[-500:]}")
            os.replace(f"{tmp}/m.git", mirror)
    elif commit and not _has_commit(mirror, commit):
        subprocess.run(["git", "--git-dir", str(mirror), "fetch", "--quiet", "origin"], capture_output=True)
    return mirror


def _has_commit(git_dir: Path, commit: str) -> bool:
    return subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "-e", *end_of_options(), f"{commit}^{{commit}}"],
                          capture_output=True).returncode == 0


def _resolve_commit(git_dir: Path, commit: str, source: str) -> str:
    proc = subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", "--verify", "--quiet",
                           *end_of_options("rev-parse"), f"{commit}^{{commit}}"], capture_output=True, text=True)
    if proc.returncode != 0:
        if commit == "HEAD":
            raise WorkspaceError(f"{source} has no commits yet: commit something first")
        raise WorkspaceError(f"commit {commit} is not in {source} (fetch it, or check the sha)")
    return proc.stdout.strip()


def _git(git_dir: Path, *args: str) -> str:
    proc = subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise WorkspaceError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def _disk_error(exc: OSError, where: Path) -> WorkspaceError:
    if exc.errno == errno.ENOSPC:
        return WorkspaceError(f"disk full while writing {where}: free some space "
                              "(or point CODEAGENT_CACHE/TMPDIR at a larger disk)")
    return WorkspaceError(f"could not write {where}: {exc}")


def trees_dir() -> Path:
    return cache_dir() / "trees-nolinks"


def host_tree(snap: RepoSnapshot) -> Path:
    """The snapshot's files extracted on this machine (read-only use: code search, indexing).
    Made once per tree in the cache, which is bounded (tree_cache.py: hold a tree you keep using).
    Only regular files and folders: the repository's symlinks (which may point anywhere on this
    machine) are left out."""
    target = trees_dir() / snap.tree
    if target.is_dir():
        tree_cache.touch(target)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    try:
        snap.write_tar(staging / "tree.tar")
        (staging / "tree").mkdir()
        try:
            with tarfile.open(staging / "tree.tar") as tar:
                plain = [member for member in tar if _file_or_folder(member)]
                safety: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                tar.extractall(staging / "tree", members=plain, **safety)
        except (OSError, tarfile.TarError) as exc:
            raise WorkspaceError(f"could not extract {snap.source}: {exc}") from exc
        try:
            os.replace(staging / "tree", target)
        except OSError:
            if not target.is_dir():  # not a concurrent twin that got there first
                raise
        tree_cache.record(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    tree_cache.evict(target.parent, keep=target)
    return target


def _file_or_folder(member: tarfile.TarInfo) -> bool:
    parts = member.name.split("/")
    return (member.isfile() or member.isdir()) and not member.name.startswith("/") and ".." not in parts


def git_reader(git_dir: str | os.PathLike, commit: str) -> Callable[[str], bytes | None]:
    """read(path) from a git object store at `commit` (no tree extracted); None when absent."""
    object_id(commit, "commit")

    def read(path: str) -> bytes | None:
        proc = subprocess.run(["git", "--git-dir", str(git_dir), "show", *end_of_options(), f"{commit}:{path}"],
                              capture_output=True)
        return proc.stdout if proc.returncode == 0 else None

    return read


def environment_note(sandbox) -> str:
    """The sandbox image's ENVIRONMENT_NOTE ('' none: the base image, a user's own image)."""
    try:
        data = sandbox.read_file(ENVIRONMENT_NOTE, max_bytes=MAX_NOTE)
    except Exception:  # noqa: BLE001 - no note is no note, whatever the sandbox says
        return ""
    return data.decode("utf-8", errors="replace").strip() if isinstance(data, bytes) else str(data).strip()
