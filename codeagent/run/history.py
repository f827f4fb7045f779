"""The repository's history for `solve` (TUI, headless, ACP): the user's branches, tags and remote-tracking
branches, with their commits, copied into the sandbox's repository, and the sandbox's base commit put on top of
the user's HEAD, so that `git log -p`, `git blame` and `git show` work there as in the user's checkout.

A copy: a git bundle of those refs, made from the user's object store (read, never written) with none of the
repository's configuration, hooks or other refs (stash, notes, replace); nothing the agent does reaches the
user's repository. Evaluation and training never call this: their sandboxes stay sealed (one commit, no
history newer than the task's base). `agent.repository_history: false` seals `solve` too. What was given is
recorded in the trajectory (the task's `repository_history`).
"""

from __future__ import annotations

import shlex
import subprocess
import tempfile
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..sandbox import Sandbox
from ..sandbox.workspace import BASE_TAG, RepoSnapshot
from .printers import counted

MAX_BYTES = 512 * 1024 * 1024  # a bigger object store is not copied (the note says so)
WORK_BRANCH = "codeagent-task"  # the sandbox's own branch: the user's branch names stay free
SAFE = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "gc.auto=0")
IDENTITY = {"GIT_AUTHOR_NAME": "codeagent", "GIT_AUTHOR_EMAIL": "codeagent@localhost",
            "GIT_COMMITTER_NAME": "codeagent", "GIT_COMMITTER_EMAIL": "codeagent@localhost"}

# In the sandbox: the refs fetched from the bundle, then the base commit on top of the user's HEAD (the
# user's commit itself when its tree is the base's: a working tree with no change). The diff is against the
# base tag's tree, which does not change. In a subshell: the agent's shell keeps its options and its folder.
# Few git processes: each costs tens of milliseconds on a loaded machine, before the first model request.
LINK_SCRIPT = """(set -e
cd {workdir}
git branch -m {branch} 2>/dev/null || true
git -c maintenance.auto=false -c fetch.writeCommitGraph=false fetch -q --no-tags --no-write-fetch-head \\
    --no-auto-gc {bundle} '+refs/heads/*:refs/heads/*' '^refs/heads/{branch}' '+refs/remotes/*:refs/remotes/*' \\
    '+refs/tags/*:refs/tags/*' {head_ref}
rm -f {bundle}
set -- $(git rev-parse -q {tag}^{{tree}} {head}^{{tree}} 2>/dev/null) || true
if [ $# = 2 ]; then
  if [ "$1" = "$2" ]; then new={head}
  else new=$({identity} git commit-tree "$1" -p {head} -m 'codeagent base: your working tree on top of HEAD'); fi
  printf 'update HEAD %s\\nupdate refs/tags/{tag} %s\\n' "$new" "$new" | git update-ref --stdin && echo linked
fi
)"""


def sealed_history() -> dict[str, Any]:
    return {"given": False, "note": "history sealed (agent.repository_history: false): one commit, as in eval"}


def history_source(snap: RepoSnapshot, repo: str) -> tuple[Path, str] | None:
    """The user's git directory and the commit the run starts from (its HEAD under a working-tree
    snapshot); None outside git or before the first commit."""
    if snap.working_tree is None:
        return snap.git_dir, snap.commit
    if not snap.working_tree.in_git or not snap.working_tree.base:
        return None
    found = subprocess.run(["git", *SAFE, "-C", repo, "rev-parse", "--path-format=absolute", "--git-common-dir"],
                           capture_output=True, text=True)
    return (Path(found.stdout.strip()), snap.working_tree.base) if found.returncode == 0 else None


@dataclass
class Bundle:
    """The history made ready on the host: the bundle's bytes, the start commit, its refs (or why not)."""

    data: bytes = b""
    head: str = ""
    refs: int = 0
    with_head: bool = False
    refused: str = ""  # why there is no history to give


class PreparedHistory:
    """The bundle, made in a thread of its own as soon as the snapshot is known (while the sandbox starts:
    its git commands are off the path to the first model request); `give(sandbox)` puts it in."""

    def __init__(self, snap: RepoSnapshot, repo: str):
        self._bundle = Bundle(refused="history not given: it was not made")
        self._thread = threading.Thread(target=self._make, args=(snap, repo), name="codeagent-history", daemon=True)
        self._thread.start()

    def _make(self, snap: RepoSnapshot, repo: str) -> None:
        try:
            self._bundle = make_bundle(snap, repo)
        except (OSError, subprocess.SubprocessError) as error:
            self._bundle = Bundle(refused=f"history not given: {error}")

    def give(self, sandbox: Sandbox) -> dict[str, Any]:
        self._thread.join()
        return put_in(sandbox, self._bundle)


def give_history(sandbox: Sandbox, snap: RepoSnapshot, repo: str) -> dict[str, Any]:
    """Copy the history into the sandbox; what was done, for the trajectory and the one line said about it
    (`given`, `head`, `refs`, `note`). Never raises for the history's sake: a run goes on sealed."""
    return put_in(sandbox, make_bundle(snap, repo))


def make_bundle(snap: RepoSnapshot, repo: str) -> Bundle:
    source = history_source(snap, repo)
    if source is None:
        return Bundle(refused="no history: the folder is not a git repository with a commit")
    git_dir, head = source
    if (size := _store_bytes(git_dir)) > MAX_BYTES:
        return Bundle(refused=f"history not given: the repository's objects take {size >> 20} MiB, over "
                              f"{MAX_BYTES >> 20} MiB")
    with tempfile.TemporaryDirectory(prefix="codeagent-history-") as scratch:
        bundle = Path(scratch) / "history.bundle"
        with_head = _head_is(git_dir, head)  # a detached HEAD is on no branch: it goes in by its name
        made = subprocess.run(["git", *SAFE, "--git-dir", str(git_dir), "bundle", "create", "-q", str(bundle),
                               "--branches", "--tags", "--remotes", *(["HEAD"] if with_head else [])],
                              capture_output=True, text=True)
        if made.returncode != 0 or not bundle.exists():
            return Bundle(refused=f"history not given: {made.stderr.strip()[-300:] or 'no branch or tag'}")
        return Bundle(bundle.read_bytes(), head, _bundle_refs(git_dir, bundle), with_head)


def put_in(sandbox: Sandbox, bundle: Bundle) -> dict[str, Any]:
    if bundle.refused:
        return {"given": False, "note": bundle.refused}
    target = f"/tmp/.codeagent-history-{uuid.uuid4().hex[:12]}.bundle"  # a local sandbox's /tmp is shared
    try:
        sandbox.write_file(target, bundle.data)
    except OSError as error:
        return {"given": False, "note": f"history not given: {error}"}
    script = LINK_SCRIPT.format(workdir=shlex.quote(sandbox.workdir), branch=WORK_BRANCH, bundle=target, tag=BASE_TAG,
                                head=shlex.quote(bundle.head),
                                head_ref="'+HEAD:refs/codeagent/head'" if bundle.with_head else "",
                                identity=" ".join(f"{key}={value}" for key, value in IDENTITY.items()))
    result = sandbox.run(script, timeout=300)
    if result.exit_code != 0:
        return {"given": False, "note": f"history not given: {result.output.strip()[-300:]}"}
    linked = "linked" in result.output
    return {"given": True, "head": bundle.head, "refs": bundle.refs,
            "note": f"history: {counted(bundle.refs, 'ref')} of your repository (read from its objects, none of its "
                    "settings)" + ("" if linked else "; the start commit is on none of them, so HEAD has no history")}


def _store_bytes(git_dir: Path) -> int:
    counted = subprocess.run(["git", *SAFE, "--git-dir", str(git_dir), "count-objects", "-v"],
                             capture_output=True, text=True)
    fields = dict(line.split(": ", 1) for line in counted.stdout.splitlines() if ": " in line)
    alternates = git_dir / "objects" / "info" / "alternates"
    borrowed = 0 if not alternates.exists() else sum(
        _folder_bytes(Path(line)) for line in alternates.read_text().splitlines() if line.strip())
    return (int(fields.get("size", 0)) + int(fields.get("size-pack", 0))) * 1024 + borrowed


def _folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) if folder.is_dir() else 0


def _head_is(git_dir: Path, commit: str) -> bool:
    found = subprocess.run(["git", *SAFE, "--git-dir", str(git_dir), "rev-parse", "--verify", "-q", "HEAD"],
                           capture_output=True, text=True)
    return found.stdout.strip() == commit


def _bundle_refs(git_dir: Path, bundle: Path) -> int:
    listed = subprocess.run(["git", *SAFE, "--git-dir", str(git_dir), "bundle", "list-heads", str(bundle)],
                            capture_output=True, text=True)
    return len([line for line in listed.stdout.splitlines() if line.strip() and not line.endswith(" HEAD")])
