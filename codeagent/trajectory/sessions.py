"""Sessions in the trajectory store: what `--resume` / `/resume` find, for one repository."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .store import TrajectoryError, TrajectoryStore

RECENT_SCAN = 2000  # trajectory headers looked at to find a repository's sessions
LAST = ("", "last", "--last")


@dataclass
class SessionHeader:
    """What /resume lists: read from a trajectory file's first line only."""

    id: str
    created: str
    repo: str
    issue: str


def recent_sessions(store: TrajectoryStore, repo: str, limit: int = 10) -> list[SessionHeader]:
    """The repository's latest sessions, newest first."""
    found: list[SessionHeader] = []
    for trajectory_id in reversed(store.ids()[-RECENT_SCAN:]):
        header = read_header(store.path_for(trajectory_id))
        if header and same_repo(header.repo, repo):
            found.append(header)
            if len(found) >= limit:
                break
    return found


def find_session(store: TrajectoryStore, ref: str | None, repo: str) -> str:
    """A saved session's id: from an id or a unique prefix; None or "last" is the repository's
    latest session (never another repository's: its patch would be applied there)."""
    if ref is None or ref in LAST:
        recent = recent_sessions(store, repo, 1)
        if not recent:
            raise TrajectoryError(f"no saved session for {repo} in {store.root}")
        return recent[0].id
    return store.resolve(ref)


def read_header(path: Path) -> SessionHeader | None:
    try:
        with path.open("rb") as handle:
            record = json.loads(handle.readline())
        header = record["trajectory"]
        if header.get("parent_id"):  # a subagent's run: its parent is the session
            return None
        task = header.get("task") or {}
        extra = task.get("extra")
        title = extra.get("title") if isinstance(extra, dict) else None  # a custom command's session: as typed
        issue = str(title or task.get("problem_statement") or "").strip().splitlines()
        return SessionHeader(id=header["id"], created=str(header.get("created", ""))[:19].replace("T", " "),
                             repo=str(task.get("repo", "")), issue=issue[0] if issue else "")
    except (OSError, ValueError, KeyError, TypeError):
        return None


def same_repo(saved: str, repo: str) -> bool:
    """A URL matches itself; a path matches the same directory. A relative path recorded by an older
    version matches nothing: it was relative to a directory that is not known."""
    if not Path(saved).expanduser().is_dir():
        return saved == repo
    if not Path(saved).expanduser().is_absolute():
        return False
    try:
        return Path(saved).expanduser().resolve() == Path(repo).expanduser().resolve()
    except OSError:
        return False
