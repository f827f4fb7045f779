"""/undo and /apply: the session's patch between the sandbox, the trajectory, its .patch file and
the user's working tree. Run on the session's thread.

`SessionState.applied` remembers where codeagent last wrote and which patch: the next /apply writes only
what changed since (a file still as codeagent wrote it counts as clean), so a follow-up, or a commit
of the applied files, does not stop it. With write-through each change is applied as it is made,
and /undo puts the file back too."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ...events import PatchChanged
from ...sandbox import snapshot
from ..apply import ApplyOutcome, apply_patch
from ..solve import write_patch_file

if TYPE_CHECKING:
    from .parts import SessionParts
    from .state import SessionState


def nothing_to_undo(state: SessionState) -> str | None:
    """Why /undo has nothing to do, or None when it has."""
    history = state.history
    if history.can_undo:
        return None
    if history.undone:
        return "Nothing more to undo: the agent's changes are all undone."
    if state.patch.strip():
        return "Nothing to undo: the agent has not changed any file since this patch was loaded."
    return "Nothing to undo: the agent has not changed any file yet."


def undo(session: SessionParts) -> None:
    state = session.state
    change = state.history.last_change()
    if not session.slot.swap_patch(change.after, change.before):
        session.notice("Not undone: the sandbox's files no longer match the last patch.", "error")
        return
    state.history.drop_last()
    if state.trajectory_id:
        with session.store.open(state.trajectory_id) as writer:
            writer.update(patch=change.before)
        if session.patch_file:
            write_patch_file(session.patch_file, change.before)
    changed = ", ".join(change.files) or "the patch"
    where = f" of step {change.step + 1}" if change.step is not None else ""
    state.notes.append(f"Note: the user reverted your last change{where} ({changed}); the files are back "
                       "to how they were before it.")
    session.emit(PatchChanged(run_id=state.trajectory_id or "", step=change.step or 0, patch=change.before))
    session.notice(f"Undone: the agent's last change{where} ({changed}). The agent is told with your next message.",
                   "success")
    if state.write_through:
        write_through(session, change.before)


def apply(session: SessionParts, target: str) -> None:
    patch = session.state.patch
    outcome = _apply(session, target, patch)
    kept = "" if outcome.applied or not session.patch_file or not patch.strip() \
        else f"\nThe patch is in {session.patch_file}."
    session.notice(outcome.message + kept, "success" if outcome.applied else "warning")


def write_through(session: SessionParts, patch: str) -> None:
    """Write-through mode: the agent's patch as it stands now goes to the user's working tree. A
    refusal (the user's edits conflict) pauses the mode, with a notice; /apply tries again."""
    state = session.state
    earlier = state.applied[1] if state.applied and state.applied[0] == session.apply_repo else None
    if session.apply_repo is None or state.task is None or not (patch.strip() or earlier):
        return
    outcome = _apply(session, session.apply_repo, patch)
    if outcome.applied:
        session.notice("Written to your working tree: " + outcome.message, "info")
        return
    state.write_through = False
    session.notice(f"Write-through paused: {outcome.message}\nThe sandbox keeps the change; /apply when your "
                   "files are ready.", "warning")


def _apply(session: SessionParts, target: str, patch: str) -> ApplyOutcome:
    state = session.state
    earlier = state.applied[1] if state.applied and state.applied[0] == target else None
    task = state.task
    base = snapshot(task.repo, task.base_commit) if task is not None and task.base_commit else None
    resumed = state.resumed_patch if earlier is None else None  # a reopened session's: perhaps applied
    outcome = apply_patch(target, patch, base=base, applied=earlier, maybe_applied=resumed)
    if outcome.applied:
        state.applied = (target, patch)
    return outcome


def working_tree(repo: str) -> str | None:
    """The repository as a working tree of the user's, for /apply: a local directory that is not
    one of the bundled examples (those live in codeagent's cache)."""
    from ...sandbox.workspace import cache_dir

    path = Path(repo).expanduser()
    if not path.is_dir():
        return None
    try:
        path.resolve().relative_to((cache_dir() / "examples").resolve())
        return None
    except ValueError:
        return str(path)
