"""The editor's side of a session's files. Where a sandbox path shows in the editor's folder (`host_path`:
never outside that folder, never through a symlink that leaves it, never in .git: the model's paths are
untrusted), and what the editor's files should hold as the patch changes (`EditorFiles`: written through
ACP's `fs/write_text_file` when the client says it can, so that the user reviews and undoes them there)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import patches
from ..patches.parse import parse

_SECTION = re.compile(r"^(?=diff --git )", re.MULTILINE)
_LINK_MODE = re.compile(r"^(?:new file mode|new mode) 120000$", re.MULTILINE)


def host_path(root: Path, workdir: str, path: str) -> Path | None:
    """The editor's file for the sandbox's `path` (absolute under `workdir`, or relative to it); None when it
    would be outside `root` (an absolute path elsewhere, `..`, a symlink of the folder that leaves it) or in
    a .git folder."""
    path = str(path)
    if path.startswith("/"):
        prefix = workdir.rstrip("/") + "/"
        if not path.startswith(prefix):
            return None
        path = path[len(prefix):]
    relative = posixpath.normpath(path) if path else ""
    if not patches.safe_relative(relative):
        return None
    target = Path(root) / relative
    try:
        real_root, real = Path(root).resolve(), target.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return None
    return target if real == real_root or real_root in real.parents else None


@dataclass
class FileWrite:
    """One `fs/write_text_file` for the editor: an absolute path in its folder and the file's whole text."""

    path: str
    content: str
    relative: str


class EditorFiles:
    """What the editor's files should hold, from the session's patch: each file the patch adds or changes,
    with the sandbox's text of it, and a file the patch no longer touches put back as the sandbox has it (an
    undone edit). What cannot be written as a text file (a deletion, a rename's old name, a symlink, a binary
    or non-UTF-8 file, a path outside the folder) is said once, not written."""

    def __init__(self, root: str | Path, workdir: Callable[[], str], read_file: Callable[[str], bytes]):
        self.root = Path(root)
        self.workdir = workdir
        self.read_file = read_file
        self.written: dict[str, str] = {}  # relative path -> the text the editor was last given
        self._patch = ""
        self._said: set[str] = set()

    def sync(self, patch: str) -> tuple[list[FileWrite], list[str]]:
        """The writes that bring the editor's files to `patch`, and the notes to tell the user."""
        if patch == self._patch:
            return [], []
        self._patch = patch
        writes: list[FileWrite] = []
        notes: list[str] = []
        links = _symlinks(patch)
        changed: set[str] = set()
        skipped = set(links)
        for diff in parse(patch):
            if diff.old is not None and diff.old != diff.new:
                self._note(notes, f"{diff.old} is {'deleted' if diff.new is None else 'renamed'} in the sandbox: "
                                  "the editor cannot delete a file; the patch file has the change")
            if diff.new is None:
                continue
            changed.add(diff.new)
            if diff.binary or diff.new in links:
                skipped.add(diff.new)
                self._note(notes, f"{diff.new} is {'a binary file' if diff.binary else 'a symlink'}: not written "
                                  "through the editor; the patch file has the change")
        for relative in sorted(changed | set(self.written)):
            if relative in skipped:
                continue
            target = host_path(self.root, self.workdir(), relative)
            if target is None:
                self._note(notes, f"{relative} is outside the session's folder: not written")
                continue
            try:
                text = self.read_file(relative).decode("utf-8")
            except UnicodeDecodeError:
                self._note(notes, f"{relative} is not UTF-8 text: not written through the editor")
                continue
            except (OSError, ValueError):
                if relative not in changed:
                    self._note(notes, f"{relative} was made and removed again in the sandbox: the editor keeps it")
                continue
            if self.written.get(relative) != text:
                self.written[relative] = text
                writes.append(FileWrite(str(target), text, relative))
        return writes, notes

    def failed(self, write: FileWrite) -> None:
        """The editor did not write it: it is tried again at the next change."""
        self.written.pop(write.relative, None)
        self._patch = ""

    def _note(self, notes: list[str], text: str) -> None:
        if text not in self._said:
            self._said.add(text)
            notes.append(text)


def _symlinks(patch: str) -> set[str]:
    """The paths the patch makes symlinks."""
    found: set[str] = set()
    for section in _SECTION.split(patch):
        if _LINK_MODE.search(section.split("\n@@", 1)[0]):
            found.update(diff.new for diff in parse(section) if diff.new)
    return found
