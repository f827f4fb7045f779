"""What a typed message becomes before the session gets it: `@path` mentions put the repository's
files in (mentions.py) and pasted image paths attach the images (agent/images.py). Also /init's
request."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...agent.images import SUFFIXES, ImageError, attach, store_image
from ...agent.prompts import render
from ...models.vision import image_refusal
from ...sandbox import snapshot
from .mentions import RepoFiles, expand

if TYPE_CHECKING:
    from .core import Session

Notice = Callable[[str, str], Any]  # (text, level)
_TOKEN = re.compile(r"'([^']+)'|\"([^\"]+)\"|((?:\\ |\S)+)")
_files: dict[tuple[str, str | None], RepoFiles] = {}


def repo_files(session: Session, fresh: bool = False) -> RepoFiles:
    """The tree the session works from: its task's base (a snapshot of the working tree, or a
    commit); before the first message, the given commit, else the working tree as it is now (taken
    again when `fresh`: a message; a completion reuses the last one)."""
    commit = session.task.base_commit if session.task is not None else session.commit
    key = (session.repo, commit)
    if key not in _files or (fresh and commit is None):
        snap = snapshot(session.repo, commit, working_tree=commit is None and session.apply_repo is not None)
        _files[key] = RepoFiles.load(snap.git_dir, snap.commit, working_tree=snap.working_tree is not None)
    return _files[key]


def completer(session: Session) -> Callable[[str], str]:
    """For the input box: what completes `@prefix` (nothing when the repository cannot be read)."""
    def complete(prefix: str) -> str:
        try:
            return repo_files(session).complete(prefix)
        except Exception:  # a hint while typing: never an error
            return ""

    return complete


def prepare(text: str, session: Session, notice: Notice) -> str | None:
    """The message to send, or None when it must not be sent (the notice says why)."""
    images = _image_paths(text)
    if images:
        refused = image_refusal(session.model) if session.model is not None else "no model is configured"
        if refused:
            notice(f"Not sent: {refused}.", "error")
            return None
        try:
            stored = [store_image(path, session.store.root) for path in images]
        except (ImageError, OSError) as error:
            notice(f"Not sent: {error}", "error")
            return None
        notice(f"Attached {len(stored)} image(s): " + ", ".join(Path(path).name for path in images), "info")
    if "@" in text:
        try:
            text, notes = expand(text, repo_files(session, fresh=True))
        except Exception as error:  # noqa: BLE001 - an unreadable repository: the message goes as typed
            text, notes = text, [f"@mentions not read: {error}"]
        for note in notes:
            notice(note, "warning")
    return attach(text, stored) if images else text


def init_request(session: Session) -> str:
    """/init's message: the prompts/init.j2 request to write AGENTS.md."""
    try:
        exists = "AGENTS.md" in repo_files(session).entries
    except Exception:  # noqa: BLE001 - the agent looks for itself
        exists = False
    return render("init", session.config.agent.prompts_dir, exists=exists)


def _image_paths(text: str) -> list[str]:
    """Paths of image files the user pasted (a terminal pastes a dropped file as its path)."""
    found = []
    for match in _TOKEN.finditer(text):
        token = next(group for group in match.groups() if group is not None).replace("\\ ", " ").rstrip(",.;:!?)")
        if token.lower().endswith(SUFFIXES) and not token.startswith("@") and Path(token).expanduser().is_file():
            found.append(str(Path(token).expanduser()))
    return list(dict.fromkeys(found))
