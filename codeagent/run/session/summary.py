"""A session in a few words: the summary printed after the TUI closes (with how to resume it), and
the one-line titles /resume lists."""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ...visible import visible
from ..printers import counted, patch_stats

if TYPE_CHECKING:
    from ...task import Task
    from ...trajectory.sessions import SessionHeader
    from .core import Session

TITLE_CHARS = 60


def exit_summary(session: Session, task: Task | None = None) -> str | None:
    """What the session did, where its patch is, and the command that continues it; for a task stopped
    before its run began (Ctrl-C while the sandbox was prepared: no trajectory yet), where its issue is kept
    and the command that starts it again. None when no task was given (`task`: the one given up front)."""
    run_id = session.trajectory_id
    if run_id is None:
        return _not_started(session, session.task or task)
    stats = session.state.stats
    ended = f" · {session.last_status}" if session.last_status else ""
    lines = [f"codeagent: session {run_id}{ended} · {counted(stats.steps, 'step')} · {stats.prompt_tokens:,} prompt + "
             f"{stats.completion_tokens:,} completion tokens · ${stats.cost:.4f}"]
    patch = session.patch
    if patch.strip():
        added, removed, files = patch_stats(patch)
        where = f"; saved in {session.patch_file}" if session.patch_file else ""
        lines.append(f"Patch: {files} file(s), +{added} -{removed}, {applied_state(session)}{where}")
    else:
        lines.append("Patch: no changes")
    lines.append(f"Resume it: codeagent solve --resume {run_id}")
    return "\n".join(lines)


def applied_state(session: Session) -> str:
    """Where the patch is in the user's working tree: `applied to T` (all of it), `changed since it was applied
    to T` (what /apply would write is the rest), `not applied`; "" with no patch."""
    patch = session.patch
    if not patch.strip():
        return ""
    target, applied = session.state.applied or (None, None)
    return (f"applied to {target}" if applied == patch else
            f"changed since it was applied to {target}" if target else "not applied")


def _not_started(session: Session, task: Task | None) -> str | None:
    if task is None or not task.problem_statement.strip():
        return None
    lines = ["codeagent: stopped before the agent's first step: nothing ran, no trajectory was written"]
    try:
        kept = keep_issue(session.store.root, task.problem_statement)
    except OSError as error:
        return "\n".join([*lines, f"(the issue could not be kept: {error.strerror or error})"])
    commit = f" --commit {shlex.quote(session.commit)}" if session.commit else ""
    lines += [f"Issue kept in {kept}",
              f"Start it again: codeagent solve --repo {shlex.quote(task.repo)}{commit} --issue-file "
              f"{shlex.quote(str(kept))}"]
    return "\n".join(lines)


def keep_issue(root: Path, text: str) -> Path:
    """The issue of a session that never started, in the trajectory store's `issues/` folder."""
    folder = Path(root) / "issues"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.md"
    path.write_text(text, encoding="utf-8")
    return path


SESSION_COLUMNS = f"{'started':<16}  {'steps':>5}  {'status':<18}  title"


def session_row(header: SessionHeader, steps: int | str, status: str | None) -> str:
    """/resume's picker: date, steps, how it ended, and the issue's first line."""
    issue = " ".join(visible(header.issue).split()) or "(no issue text)"
    return f"{header.created[:16]:<16}  {steps!s:>5}  {visible(status or 'unfinished')[:18]:<18}  {issue}"


def session_title(header: SessionHeader, limit: int = TITLE_CHARS) -> str:
    """`id  issue`, the issue on one line and cut with an ellipsis."""
    issue = " ".join(visible(header.issue).split())
    if len(issue) > limit:
        issue = issue[:limit - 1].rstrip() + "…"
    return f"{header.id}  {issue}"
