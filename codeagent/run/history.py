"""The repository's history for `solve` (TUI, headless, ACP): the user's branches, tags and remote-tracking
branches, with their commits, copied into the sandbox's repository, and the sandbox's base commit put on top of
the user's HEAD, so that `git log -p`, `git blame` and `git show` work there as in the user's checkout.

A copy: a git bundle of those refs, made from the user's object store (read, never written) with none of the
repository's configuration, hooks or other refs (stash, notes, replace); nothing the agent does reaches the
user's repository. Evaluation and training never call this: their sandboxes stay sealed (one commit, no
history newer than the task's base). `agent.repository_history: false` seals `solve` too. What was given is
recorded in the trajectory (the task's `extra["repository_history"]`).
"""

from __future__ import annotations

import shlex
import subprocess
import tempfile
import uuid
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
LINK_SCRIPT = """(set -e
cd {workdir}
git branch -m {branch} 2>/dev/null || true
git fetch -q --no-tags --no-write-fetch-head {bundle} '+refs/heads/*:refs/heads/*' '^refs/heads/{branch}' \\
    '+refs/remotes/*:refs/remotes/*' '+refs/tags/*:refs/tags/*' {head_ref}
rm -f {bundle}
tree=$(git rev-parse {tag}^{{tree}})
if git cat-file -e {head}^{{commit}} 2>/dev/null; then
  if [ "$(git rev-parse {head}^{{tree}})" = "$tree" ]; then new={head}
  else new=$(git log -1 --format=%B {tag} | {identity} git commit-tree "$tree" -p {head}); fi
  git update-ref HEAD "$new" && git tag -f {tag} "$new" >/dev/null && echo linked
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


def give_history(sandbox: Sandbox, snap: RepoSnapshot, repo: str) -> dict[str, Any]:
    """Copy the history into the sandbox; what was done, for the trajectory and the one line said about it
    (`given`, `head`, `refs`, `note`). Never raises for the history's sake: a run goes on sealed."""
    source = history_source(snap, repo)
    if source is None:
        return {"given": False, "note": "no history: the folder is not a git repository with a commit"}
    git_dir, head = source
    if (size := _store_bytes(git_dir)) > MAX_BYTES:
        return {"given": False, "note": f"history not given: the repository's objects take {size >> 20} MiB, over "
                                        f"{MAX_BYTES >> 20} MiB"}
    with tempfile.TemporaryDirectory(prefix="codeagent-history-") as scratch:
        bundle = Path(scratch) / "history.bundle"
        with_head = _head_is(git_dir, head)  # a detached HEAD is on no branch: it goes in by its name
        made = subprocess.run(["git", *SAFE, "--git-dir", str(git_dir), "bundle", "create", "-q", str(bundle),
                               "--branches", "--tags", "--remotes", *(["HEAD"] if with_head else [])],
                              capture_output=True, text=True)
        if made.returncode != 0 or not bundle.exists():
            return {"given": False, "note": f"history not given: {made.stderr.strip()[-300:] or 'no branch or tag'}"}
        refs = _bundle_refs(git_dir, bundle)
        target = f"/tmp/.codeagent-history-{uuid.uuid4().hex[:12]}.bundle"  # a local sandbox's /tmp is shared
        try:
            sandbox.write_file(target, bundle.read_bytes())
        except OSError as error:
            return {"given": False, "note": f"history not given: {error}"}
    script = LINK_SCRIPT.format(workdir=shlex.quote(sandbox.workdir), branch=WORK_BRANCH, bundle=target, tag=BASE_TAG, head=shlex.quote(head),
                                head_ref="'+HEAD:refs/codeagent/head'" if with_head else "",
                                identity=" ".join(f"{key}={value}" for key, value in IDENTITY.items()))
    result = sandbox.run(script, timeout=300)
    if result.exit_code != 0:
        return {"given": False, "note": f"history not given: {result.output.strip()[-300:]}"}
    linked = "linked" in result.output
    return {"given": True, "head": head, "refs": refs,
            "note": f"history: {counted(refs, 'ref')} of your repository (read from its objects, none of its settings)"
                    + ("" if linked else "; the start commit is on none of them, so HEAD has no history")}


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
