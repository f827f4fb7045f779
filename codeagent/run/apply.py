"""Apply a patch to the user's working tree, only when it is safe.

The patch comes out of the sandbox, so it is the model's: untrusted bytes. Before anything is
written, git itself applies it to a scratch index (the tree the run started from: a snapshot of the
working tree, or HEAD; objects in a temporary directory) and reports every path and mode it would
produce; that is what gets checked, not our own reading of the diff. What gets written is the step
from the files' state now to that result: a file that still holds what the run started from (or
what codeagent wrote at its last apply) takes the patch's version; one the user changed since is
merged three-way, and refused when that conflicts. The user's index and .git are not written.
Refused, with every offending path named:
- a symlink whose target is absolute or leaves the repository (or points into .git), followed
  link by link through the links the patch makes and the checkout has;
- a path that is absolute, has `.`/`..` components, or lies in .git (git refuses those too);
- codeagent's own settings file (.codeagent.yaml): in a trusted repository it may choose the
  sandbox and the model's endpoint, so the model must not write it for the next run;
- a path under, or a file that is, an existing symlink of the checkout (never write through one);
- files the user changed since, where the three-way merge conflicts (the user's edits are never
  overwritten);
- a patch that does not apply cleanly. `git apply` is all-or-nothing.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import patches
from ..config import PROJECT_FILE
from ..events import Event, PatchChanged
from ..git_args import end_of_options, object_id
from ..sandbox.workspace import RepoSnapshot

SYMLINK_MODE = "120000"


@dataclass
class ApplyOutcome:
    applied: bool
    message: str


@dataclass
class _Change:
    path: str
    old_mode: str
    new_mode: str
    new_blob: str


def touched_files(patch: str) -> list[str]:
    return patches.files(patch)


def apply_patch(repo: str | Path, patch: str, *, base: RepoSnapshot | None = None,
                applied: str | None = None, maybe_applied: str | None = None) -> ApplyOutcome:
    """Apply `patch` (made on `base`, default: the checkout's HEAD) to the working tree at `repo`.
    `applied`: the patch codeagent last wrote there from the same base (None: none yet); only what
    changed since is written, and a file whose content is what codeagent wrote counts as clean.
    `maybe_applied`: a patch that may have been applied (a resumed session's): a file as it left
    it counts as clean too, but your edits are merged from the base, never from it."""
    outcome = _apply(Path(repo), patch, base, applied, maybe_applied)
    outcome.message = outcome.message.translate(_CONTROL)  # paths and git's words name the model's files
    return outcome


class WriteThrough:
    """An event subscriber for write-through mode: each patch the run reaches is applied to the
    working tree at once (what changed since the last one). A refusal pauses it, with a warning."""

    def __init__(self, repo: str | Path, base: RepoSnapshot | None, say: Callable[[str], None],
                 maybe_applied: str | None = None):
        self.repo, self.base, self.say, self.maybe_applied = repo, base, say, maybe_applied
        self.applied: str | None = None
        self.paused = False

    def __call__(self, event: Event) -> None:
        if self.paused or not isinstance(event, PatchChanged) or event.patch == (self.applied or ""):
            return
        if not event.patch.strip() and self.applied is None:
            return
        outcome = apply_patch(self.repo, event.patch, base=self.base, applied=self.applied,
                              maybe_applied=self.maybe_applied if self.applied is None else None)
        if outcome.applied:
            self.applied = event.patch
            self.say(f"write-through: {outcome.message}")
        else:
            self.paused = True
            self.say(f"write-through paused: {outcome.message}")


def _apply(repo: Path, patch: str, base: RepoSnapshot | None, applied: str | None,
           maybe_applied: str | None) -> ApplyOutcome:
    if not patch.strip() and not (applied or "").strip() and not (maybe_applied or "").strip():
        return ApplyOutcome(False, "the patch is empty: nothing to apply")
    top = _git(repo, "rev-parse", "--show-toplevel")
    shown = os.path.abspath(repo)
    if top.returncode == 0:  # the patch's paths are relative to the top
        root = Path(_text(top.stdout))
        git = _Git(["git", "-C", str(root)], _objects_of(root))
    elif base is not None and base.working_tree is not None and not base.working_tree.in_git and repo.is_dir():
        root = repo.resolve()  # a folder outside git: codeagent's store for it stands in for a repository
        git = _Git(["git", "--git-dir", str(base.git_dir), "--work-tree", str(root), "-C", str(root)], None)
    else:
        return ApplyOutcome(False, f"{repo} is not a git working tree: {_text(top.stderr)}")
    with tempfile.TemporaryDirectory(prefix="codeagent-apply-") as scratch_dir:
        scratch = Path(scratch_dir)
        git.scratch(scratch, base)
        start = git.base_tree(base)
        target, changes, error = _preview(git, start, patch, scratch / "model.patch", shown)
        if error:
            return ApplyOutcome(False, error)
        before, earlier, error = _preview(git, start, applied or "", scratch / "applied.patch", shown)
        if error:  # our own record no longer applies to its base: start over from the base
            before, earlier = start, []
        maybe, unsure, error = _preview(git, start, maybe_applied or "", scratch / "maybe.patch", shown)
        if error:
            maybe, unsure = start, []
        paths = {change.path for change in changes}
        reverted = {change.path: _Change(change.path, change.new_mode, "000000", "")
                    for change in earlier + unsure if change.path not in paths}
        reverted = list(reverted.values())
        refused = _unsafe(root, changes + reverted)
        if refused:
            return ApplyOutcome(False, "not applied: the patch " + "; ".join(refused))
        files = sorted(paths | {change.path for change in reverted})
        return _write(git, shown, files, (start, before, maybe), target, scratch)


def _write(git: _Git, shown: str, files: list[str], clean: tuple[str, str, str], target: str,
           scratch: Path) -> ApplyOutcome:
    """Bring `files` to `target`. A file as the run started from it or as codeagent last wrote it
    (or may have: the trees `clean`) takes the patch's version; one the user changed since is
    merged three-way from codeagent's last version. All or nothing, through `git apply`."""
    start, before, maybe = clean
    index = {"GIT_INDEX_FILE": str(scratch / "current")}
    git.run("read-tree", before, env=index)
    listed = "\0".join(files) + "\0"
    now = git.run("update-index", "--add", "--remove", "-z", "--stdin", env=index, stdin=listed.encode())
    if now.returncode != 0:
        return ApplyOutcome(False, f"not applied: could not read your files: {_text(now.stderr)}")
    current = _text(git.run("write-tree", env=index).stdout)
    first, then, perhaps, wanted, have = (_entries(git, tree, files) for tree in (start, before, maybe, target, current))
    updates, merged, conflicts = [], [], []
    for path in files:
        mine, expected, goal = have.get(path), then.get(path), wanted.get(path)
        if mine == goal:
            continue
        if mine in (expected, first.get(path), perhaps.get(path)):
            updates.append((path, goal))
            continue
        result = _merge(git, mine, expected, goal, scratch)
        if result is None:
            conflicts.append(path)
        elif result != mine:  # equal: the patch did not change it since, your version stays
            updates.append((path, result))
            merged.append(path)
    if conflicts:
        return ApplyOutcome(False, "not applied: these files have uncommitted changes of yours that the patch "
                                   f"conflicts with (a three-way merge failed): {', '.join(conflicts)}. Commit or "
                                   "stash them, then apply the patch file.")
    if not updates:
        if start != before:
            return ApplyOutcome(True, f"nothing to apply to {shown}: the patch has not changed since codeagent's "
                                      "last apply there (your edits since are kept)")
        return ApplyOutcome(True, f"nothing to apply to {shown}: its files already hold the patch")
    lines = "".join(f"{entry[0]} {entry[1]}\t{path}\0" if entry else f"0 {'0' * 40}\t{path}\0"
                    for path, entry in updates)
    git.run("update-index", "-z", "--index-info", env=index, stdin=lines.encode())
    final = _text(git.run("write-tree", env=index).stdout)
    delta = git.run("diff-tree", "-p", "--binary", "--full-index", "--no-renames", current, final).stdout
    delta_file = scratch / "delta.patch"
    delta_file.write_bytes(delta)
    check = git.run("apply", "--check", "--binary", str(delta_file))
    if check.returncode != 0:
        return ApplyOutcome(False, f"not applied: the patch does not apply cleanly to {shown}: {_text(check.stderr)}")
    done = git.run("apply", "--binary", str(delta_file))
    if done.returncode != 0:
        return ApplyOutcome(False, f"not applied: git apply failed: {_text(done.stderr)}")
    written = [path for path, _ in updates]
    note = f" (merged with your edits: {', '.join(merged)})" if merged else ""
    return ApplyOutcome(True, f"applied to {shown}: {', '.join(written)}{note}")


def _merge(git: _Git, mine, expected, goal, scratch: Path) -> tuple[str, str] | None:
    """A three-way merge of one regular file (your version, the one the patch started from, the
    patch's): the merged (mode, blob), or None when it conflicts or cannot be merged."""
    if not (mine and expected and goal) or SYMLINK_MODE in (mine[0], expected[0], goal[0]) \
            or "160000" in (mine[0], expected[0], goal[0]):
        return None
    names = []
    for name, (_mode, blob) in zip(("mine", "base", "theirs"), (mine, expected, goal)):
        (scratch / name).write_bytes(git.run("cat-file", "blob", *end_of_options(), object_id(blob)).stdout)
        names.append(str(scratch / name))
    merged = subprocess.run(["git", "merge-file", "-p", "--", *names], capture_output=True)
    if merged.returncode != 0:
        return None
    blob = _text(git.run("hash-object", "-w", "--stdin", stdin=merged.stdout).stdout)
    return (goal[0] if mine[0] == expected[0] else mine[0]), blob


def _entries(git: _Git, tree: str, files: list[str]) -> dict[str, tuple[str, str]]:
    """(mode, blob) of each of `files` in `tree` (absent: not listed)."""
    out = git.run("ls-tree", "-r", "-z", "--full-tree", *end_of_options(), object_id(tree, "tree"), "--", *files,
                  literal=True).stdout
    entries = {}
    for record in _text(out).split("\0"):
        if record:
            meta, _, path = record.partition("\t")
            mode, _kind, blob = meta.split(" ")
            entries[path] = (mode, blob)
    return entries


def _preview(git: _Git, start: str, patch: str, patch_file: Path, shown: str) -> tuple[str, list[_Change], str | None]:
    """What the patch produces from `start`, by git's own reading: its tree and its changes."""
    if not patch.strip():
        return start, [], None
    patches.write(patch_file, patch)
    index = {"GIT_INDEX_FILE": str(patch_file) + ".index"}
    for step in (("read-tree", *end_of_options(), object_id(start, "tree")), ("apply", "--cached", "--binary", str(patch_file))):
        result = git.run(*step, env=index)
        if result.returncode != 0:
            return start, [], f"not applied: the patch does not apply cleanly to {shown}: {_text(result.stderr)}"
    tree = _text(git.run("write-tree", env=index).stdout)
    raw = git.run("diff-tree", "-r", "--no-renames", "--raw", "-z", "--no-abbrev", *end_of_options(), start,
                  object_id(tree, "tree"))
    fields = _text(raw.stdout).split("\0")
    changes = []
    for header, path in zip(fields[0::2], fields[1::2]):
        old_mode, new_mode, _old_blob, new_blob, _status = header.lstrip(":").split(" ")
        change = _Change(path, old_mode, new_mode, new_blob)
        changes.append(change)
        if new_mode == SYMLINK_MODE:
            change.new_blob = _text(git.run("cat-file", "blob", *end_of_options(), object_id(new_blob)).stdout)
    return tree, changes, None


class _Git:
    """git on the target working tree, objects in a scratch directory (the user's borrowed):
    nothing is written into the user's .git."""

    def __init__(self, prefix: list[str], objects: Path | None):
        self.prefix, self.objects, self.env = prefix, objects, dict[str, str]()

    def scratch(self, scratch: Path, base: RepoSnapshot | None) -> None:
        (scratch / "objects").mkdir()
        borrowed = [path for path in (self.objects, base.git_dir / "objects" if base is not None else None) if path]
        self.env = {"GIT_OBJECT_DIRECTORY": str(scratch / "objects"),
                    "GIT_ALTERNATE_OBJECT_DIRECTORIES": ":".join(_quoted(path) for path in borrowed)}

    def base_tree(self, base: RepoSnapshot | None) -> str:
        if base is not None:
            if base.working_tree is not None:
                return base.tree
            return _text(self.run("rev-parse", "--verify", *end_of_options("rev-parse"), f"{object_id(base.commit)}^{{tree}}").stdout)
        head = self.run("rev-parse", "--verify", "-q", "HEAD^{tree}")
        if head.returncode == 0:
            return _text(head.stdout)
        return _text(self.run("hash-object", "-t", "tree", "-w", "/dev/null").stdout)

    def run(self, *args: str, env: dict | None = None, stdin: bytes | None = None,
            literal: bool = False) -> subprocess.CompletedProcess:
        full_env = {**os.environ, **self.env, **(env or {})}
        if literal:
            full_env["GIT_LITERAL_PATHSPECS"] = "1"
        return subprocess.run([*self.prefix, *args], capture_output=True, env=full_env, input=stdin)


def _objects_of(root: Path) -> Path:
    common = Path(_text(_git(root, "rev-parse", "--git-common-dir").stdout))
    return ((common if common.is_absolute() else root / common) / "objects").resolve()


def _quoted(path: Path) -> str:
    return '"' + str(path.resolve()).replace("\\", "\\\\").replace('"', '\\"') + '"'  # a ':' in it stays one path


def _unsafe(top: Path, changes: list[_Change]) -> list[str]:
    links, outside, through, settings = [], [], [], []
    after = {change.path: (change.new_blob if change.new_mode == SYMLINK_MODE else None) for change in changes}
    for change in changes:
        if not patches.safe_relative(change.path):
            outside.append(change.path)
            continue
        if change.path.rsplit("/", 1)[-1].lower() == PROJECT_FILE:
            settings.append(change.path)
        if change.new_mode == SYMLINK_MODE and (patches.link_target_escapes(change.path, change.new_blob)
                                                or _resolves_outside(top, after, change.path)):
            links.append(f"{change.path} -> {change.new_blob}")
        parts = change.path.split("/")
        for depth in range(1, len(parts) + 1):
            here = top.joinpath(*parts[:depth])
            last = depth == len(parts)
            if here.is_symlink() and not (last and change.old_mode == SYMLINK_MODE):
                through.append(change.path)
                break
    refused = []
    if links:
        refused.append("creates symlinks that point outside the repository: " + ", ".join(links))
    if outside:
        refused.append("touches paths outside the repository or in .git: " + ", ".join(outside))
    if through:
        refused.append("writes through symlinks of the checkout: " + ", ".join(through))
    if settings:
        refused.append("changes codeagent's settings (which a trusted repository's file may use to choose the "
                       "sandbox and the model's endpoint): " + ", ".join(settings) + "; apply it by hand if you "
                       "mean it")
    return refused


def _resolves_outside(top: Path, after: dict[str, str | None], path: str) -> bool:
    """Whether the symlink at `path` leaves the repository (or enters a .git) when followed link
    by link as the tree will stand after the patch: `after` holds the patch's paths (a link's
    target, or None for anything else); other paths are the checkout's. A target that reads as
    inside can still leave through another link (`d/up -> ..`, then `d/out -> up/..`)."""
    here = path.split("/")[:-1]  # a link's target is read from its folder
    queue = (after[path] or "").split("/")
    hops = 0
    while queue:
        name = queue.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            if not here:
                return True
            here.pop()
            continue
        if name.lower() == ".git":
            return True
        candidate = "/".join([*here, name])
        if candidate in after:
            target = after[candidate]
        else:
            on_disk = top / candidate  # `here` holds folders only, never a link
            target = os.readlink(on_disk) if on_disk.is_symlink() else None
        if target is None:
            here.append(name)
            continue
        hops += 1
        if hops > 40 or not target or target.startswith("/"):
            return True
        queue = target.split("/") + queue
    return False


_CONTROL = {code: "?" for code in (*range(32), 127) if code != 10}


def _text(data: bytes) -> str:
    return patches.decode(data).strip("\n")


def _git(repo: Path, *args: str, env: dict | None = None, literal: bool = False) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    if literal:
        full_env["GIT_LITERAL_PATHSPECS"] = "1"
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=full_env)
