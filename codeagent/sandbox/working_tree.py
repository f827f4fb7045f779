"""What the user sees, as a commit: the working tree's tracked changes and untracked files that are
not ignored, on top of HEAD (the base); outside git, the folder's files (its .gitignore respected).

The user's repository is only read. The tree is built in a temporary index (a copy of the user's,
for its stat cache) and its objects go to codeagent's own store in the cache, a bare repository
that borrows the user's objects through `objects/info/alternates`: nothing is written into the
user's .git, and the index, stash, refs and files stay as they were. Symlinks are recorded as
links (git never follows them), so a link that points out of the repository brings its target
string into the sandbox, never the host file it names. Untracked files over UNTRACKED_FILE_MAX are
left out (and counted); a folder outside git with more than FOLDER_FILES_MAX files is refused.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..git_args import GitArgumentError, end_of_options, object_id, revision
from .errors import WorkspaceError

UNTRACKED_FILE_MAX = 50 * 2**20
FOLDER_FILES_MAX = 50_000
SUBJECT = "codeagent working tree"
# A fixed date: the same files on the same base give the same commit (one sandbox image, one
# cached @path listing), however often the snapshot is taken.
FIXED_DATE = "1700000000 +0000"
# git must run nothing of the repository's own while it reads the files (hooks, a file monitor),
# and keep the temporary index whole (no split index written next to the user's).
SAFE_OPTIONS = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.splitIndex=false",
                "-c", "core.untrackedCache=false", "-c", "gc.auto=0", "-c", "maintenance.auto=false")


@dataclass(frozen=True)
class WorkingTree:
    commit: str  # in the store
    tree: str
    base: str | None  # the HEAD it sits on; None outside git or before the first commit
    changed: tuple[str, ...]  # files that differ from the base (without one: every file)
    skipped: tuple[str, ...]  # untracked files left out for their size
    in_git: bool = True


def open_store(store: Path, top: str | Path, objects: Path | None) -> Path:
    """codeagent's object store `store` for the working tree at `top` (created on first use): a
    bare repository whose alternates name the user's `objects` (None outside git)."""
    top = Path(top).resolve()
    if not (store / "objects").is_dir():
        store.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=store.parent))
        try:
            _run(["git", "init", "-q", "--bare", str(staging / "s.git")])
            (staging / "s.git" / "codeagent-source").write_text(str(top) + "\n")
            try:
                os.replace(staging / "s.git", store)
            except OSError:
                if not (store / "objects").is_dir():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    alternates = store / "objects" / "info" / "alternates"
    wanted = f"{objects.resolve()}\n" if objects is not None else ""
    if (alternates.read_text() if alternates.exists() else "") != wanted:
        alternates.parent.mkdir(parents=True, exist_ok=True)
        fresh = alternates.with_name(f"alternates.{os.getpid()}")
        fresh.write_text(wanted)
        os.replace(fresh, alternates)  # a snapshot going on beside never reads a half-written file
    return store


def store_name(top: Path) -> str:
    return hashlib.sha256(str(Path(top).resolve()).encode()).hexdigest()[:20] + ".git"


def snapshot_working_tree(top: Path, git_dir: Path | None, store: Path,
                          debris: tuple[str, ...] = ()) -> tuple[Path, WorkingTree]:
    """The working tree at `top` (its repository's git dir, or None outside git) as a commit in
    codeagent's store for it (`debris`: patterns left out of a folder outside git). Returns the
    store and what was taken."""
    objects = common_objects(top) if git_dir is not None else None
    store = open_store(store, top, objects)
    with tempfile.TemporaryDirectory(prefix="codeagent-snapshot-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index"), "GIT_OBJECT_DIRECTORY": str(store / "objects"),
               "GIT_LITERAL_PATHSPECS": "1"}
        if objects is not None:  # in git
            env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = _quoted(objects)
            git = ["git", *SAFE_OPTIONS, "-C", str(top)]
            base = _head(git)
            index = Path(_out(git + ["rev-parse", "--git-path", "index"]).strip())
            index = index if index.is_absolute() else top / index
            if index.is_file():
                # read only: its stat cache spares re-reading files; its time kept, as git judges "racily
                # clean" files by it (stat times compared in whole seconds: a same-size edit looked unchanged)
                shutil.copy2(index, env["GIT_INDEX_FILE"])
            elif base:
                _out(git + ["read-tree", *end_of_options(), object_id(base, "base")], env)
        else:
            (store / "info").mkdir(exist_ok=True)
            (store / "info" / "exclude").write_text("\n".join(debris) + "\n")  # build debris, as in a sandbox
            git = ["git", *SAFE_OPTIONS, "--git-dir", str(store), "--work-tree", str(top), "-C", str(top)]
            base = None
        listed = _out(git + ["ls-files", "-z", "--others", "--exclude-standard"], env).split("\0")
        untracked = [path for path in listed if path]
        if git_dir is None and len(untracked) > FOLDER_FILES_MAX:
            raise WorkspaceError(f"{top} is not a git repository and holds {len(untracked):,} files (over "
                                 f"{FOLDER_FILES_MAX:,}): run codeagent in the project's folder, add a .gitignore, "
                                 "or `git init` it")
        skipped = tuple(path for path in untracked if _size(top / path) > UNTRACKED_FILE_MAX)
        if not skipped:
            _out(git + ["add", "-A"], env)
        else:  # the tracked files' changes, then the untracked ones but the big
            if git_dir is not None:
                _out(git + ["add", "-u"], env)
            kept = "\0".join(path.rstrip("/") for path in untracked if path not in skipped)
            if kept:
                _out(git + ["add", "--pathspec-from-file=-", "--pathspec-file-nul"], env, stdin=kept)
        tree = _out(git + ["write-tree"], env).strip()
    store_git = ["git", "--git-dir", str(store)]
    commit_env = {"GIT_AUTHOR_NAME": "codeagent", "GIT_AUTHOR_EMAIL": "codeagent@localhost",
                  "GIT_COMMITTER_NAME": "codeagent", "GIT_COMMITTER_EMAIL": "codeagent@localhost",
                  "GIT_AUTHOR_DATE": FIXED_DATE, "GIT_COMMITTER_DATE": FIXED_DATE}
    parent = ["-p", object_id(base, "base")] if base else []
    commit = _out(store_git + ["commit-tree", *parent, "-m", f"{SUBJECT}: {top}", *end_of_options(),
                               object_id(tree, "tree")], commit_env).strip()
    return store, describe(store, commit, skipped)


def _borrows(store: Path) -> bool:
    alternates = store / "objects" / "info" / "alternates"
    return alternates.exists() and bool(alternates.read_text().strip())


def describe(store: Path, commit: str, skipped: tuple[str, ...] = ()) -> WorkingTree:
    """A working-tree commit of the store, read back (its base and the files that differ from it)."""
    store_git = ["git", "--git-dir", str(store)]
    fields = _out(store_git + ["log", "-1", "--format=%T %P", *end_of_options(), object_id(commit, "commit")]).split()
    tree, base = fields[0], (fields[1] if len(fields) > 1 else None)
    against = base or _out(store_git + ["hash-object", "-t", "tree", "/dev/null"]).strip()
    names = _out(store_git + ["diff-tree", "-r", "-z", "--no-renames", "--name-only", *end_of_options(),
                              object_id(against), commit]).split("\0")
    return WorkingTree(commit, tree, base, tuple(name for name in names if name), skipped, in_git=_borrows(store))


def is_working_tree_commit(store: Path, commit: str) -> bool:
    try:
        revision(commit, "commit")
    except GitArgumentError:
        return False
    proc = subprocess.run(["git", "--git-dir", str(store), "log", "-1", "--format=%s", *end_of_options(), commit],
                          capture_output=True, text=True)
    return proc.returncode == 0 and proc.stdout.startswith(SUBJECT + ":")


def note(snap_source: str, taken: WorkingTree) -> str:
    """The one line a front end shows: where the run starts from."""
    skipped = (f"; left out {len(taken.skipped)} untracked file(s) over {UNTRACKED_FILE_MAX // 2**20} MiB "
               f"({', '.join(taken.skipped[:3])}{', ...' if len(taken.skipped) > 3 else ''})") if taken.skipped else ""
    if not taken.in_git:
        return (f"{snap_source} is not a git repository: started from a snapshot of the folder "
                f"({_files(len(taken.changed))}, .gitignore respected){skipped}")
    if taken.base is None:
        return f"started from the working tree ({_files(len(taken.changed))}; no commit yet){skipped}"
    changed = len(taken.changed)
    if not changed:
        return f"started from the working tree (no uncommitted changes; base {taken.base[:10]}){skipped}"
    return (f"started from the working tree with {changed} changed file{'s' if changed != 1 else ''} "
            f"(uncommitted edits included; base {taken.base[:10]}){skipped}")


def _files(count: int) -> str:
    return f"{count} file{'s' if count != 1 else ''}"


def common_objects(top: Path) -> Path:
    """The object directory of the repository at `top` (a linked worktree's: the main one's)."""
    common = Path(_out(["git", "-C", str(top), "rev-parse", "--git-common-dir"]).strip())
    return (common if common.is_absolute() else top / common) / "objects"


def _head(git: list[str]) -> str | None:
    proc = subprocess.run(git + ["rev-parse", "--verify", "-q", "HEAD^{commit}"], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def _quoted(path: Path) -> str:
    return '"' + str(path.resolve()).replace("\\", "\\\\").replace('"', '\\"') + '"'  # a ':' in it stays one path


def _out(args: list[str], env: dict | None = None, stdin: str | None = None) -> str:
    proc = subprocess.run(args, capture_output=True, env={**os.environ, **(env or {})},
                          input=stdin.encode() if stdin is not None else None)
    if proc.returncode != 0:
        message = proc.stderr.decode(errors="replace").strip()
        raise WorkspaceError(f"could not read the working tree ({' '.join(args[-3:])}): {message[-500:]}")
    return proc.stdout.decode("utf-8", "surrogateescape")


def _run(args: list[str]) -> None:
    _out(args)
