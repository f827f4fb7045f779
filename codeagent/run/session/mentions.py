"""`@path` mentions in the user's message: completion, and the files' text put in the message.

The files are the tree the session works from, as the sandbox has it (a snapshot of the user's
working tree, or a commit), read from git objects: no path on the host is opened or followed. A path with
`..` or an absolute one, a symlink whose target leaves the repository, a submodule, a binary
file and a path not in the tree are refused with a note; the text put in is capped.
"""

from __future__ import annotations

import posixpath
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ...git_args import end_of_options, object_id

MENTION = re.compile(r"(?:^|(?<=\s))@(\S+)")
FILE_CHARS = 20_000  # of one file
TOTAL_CHARS = 60_000  # of all the files of one message
TRAILING = ",.;:!?)]}'\""
_REGULAR, _LINK, _SUBMODULE = ("100644", "100755"), "120000", "160000"


@dataclass
class Entry:
    mode: str
    sha: str


@dataclass
class RepoFiles:
    """One commit's tree, listed once; `paths` are its regular files and symlinks."""
    git_dir: Path
    commit: str
    entries: dict[str, Entry] = field(default_factory=dict)
    working_tree: bool = False  # the commit is a snapshot of the user's working tree

    @classmethod
    def load(cls, git_dir: str | Path, commit: str, working_tree: bool = False) -> RepoFiles:
        out = _git(git_dir, "ls-tree", "-r", "-z", "--full-tree", *end_of_options(), object_id(commit, "commit"))
        files = cls(Path(git_dir), commit, working_tree=working_tree)
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, path = record.partition(b"\t")
            mode, _kind, sha = meta.decode().split()
            files.entries[path.decode("utf-8", "replace")] = Entry(mode, sha)
        return files

    @property
    def paths(self) -> list[str]:
        return sorted(path for path, entry in self.entries.items() if entry.mode != _SUBMODULE)

    def complete(self, prefix: str) -> str:
        """What to add to `prefix` (after an @): the rest of the next folder or file name that every
        match shares; "" when none or no common continuation."""
        rests = [path[len(prefix):] for path in self.paths if path.startswith(prefix) and path != prefix]
        if not rests:
            return ""
        steps = {rest.split("/", 1)[0] + ("/" if "/" in rest else "") for rest in rests}
        if len(steps) == 1:
            return steps.pop()
        return posixpath.commonprefix(sorted(steps))

    def is_folder(self, path: str) -> bool:
        return any(other.startswith(path.rstrip("/") + "/") for other in self.entries)

    def read(self, path: str) -> str:
        """The text of a regular file in the tree (following links that stay inside); MentionRefused why not."""
        if path.startswith("/") or ".." in path.split("/"):
            raise MentionRefused(f"@{path}: refused: a path with `..` or an absolute one may leave the repository")
        seen = set()
        while True:
            entry = self.entries.get(path)
            if entry is None:
                if self.is_folder(path):
                    raise MentionRefused(f"@{path}: a folder; mention its files")
                where = "in your working tree" if self.working_tree else f"at commit {self.commit[:10]}"
                raise MentionRefused(f"@{path}: not a file in the repository ({where})")
            if entry.mode == _SUBMODULE:
                raise MentionRefused(f"@{path}: a submodule, not a file")
            if entry.mode != _LINK:
                break
            target = _git(self.git_dir, "cat-file", "blob", *end_of_options(), object_id(entry.sha)).decode("utf-8", "replace")
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
            if target.startswith("/") or resolved == ".." or resolved.startswith("../") or path in seen:
                raise MentionRefused(f"@{path}: refused: a symlink that leaves the repository (to {target[:80]})")
            seen.add(path)
            path = resolved
        data = _git(self.git_dir, "cat-file", "blob", *end_of_options(), object_id(entry.sha))
        if b"\0" in data[:8192]:
            raise MentionRefused(f"@{path}: a binary file; only text files can be put in a message")
        return data.decode("utf-8", "replace")


class MentionRefused(ValueError):
    """A mention that is not put in the message; the text says why, in one line."""


def mentioned(text: str) -> list[str]:
    return [match.group(1) for match in MENTION.finditer(text)]


def expand(text: str, files: RepoFiles) -> tuple[str, list[str]]:
    """The message with the mentioned files' text after it, and one note per mention refused or cut."""
    blocks, notes, total = [], [], 0
    for raw in dict.fromkeys(mentioned(text)):
        path = raw if raw in files.entries else raw.rstrip(TRAILING)
        if path not in files.entries and "/" not in path and "." not in path and not files.is_folder(path):
            continue  # `@name`: a person or a word, not a path
        try:
            content = files.read(path)
        except MentionRefused as refused:
            notes.append(str(refused))
            continue
        room = min(FILE_CHARS, TOTAL_CHARS - total)
        if room <= 0:
            notes.append(f"@{path}: left out: the mentioned files exceed {TOTAL_CHARS:,} characters")
            continue
        if len(content) > room:
            notes.append(f"@{path}: cut to its first {room:,} of {len(content):,} characters")
            content = content[:room].rsplit("\n", 1)[0] + f"\n[... {len(content) - room:,} more characters not shown]"
        total += len(content)
        blocks.append(f'<file path="{path}">\n{content.rstrip()}\n</file>')
    if not blocks:
        return text, notes
    header = ("The files I mentioned, as in my working tree (the copy you work on):" if files.working_tree else
              f"The files I mentioned, as committed at {files.commit[:10]} (your edits since are not in them):")
    return "\n\n".join([text, header, *blocks]), notes


def _git(git_dir: str | Path, *args: str) -> bytes:
    proc = subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True)
    if proc.returncode != 0:
        raise MentionRefused(f"git {args[0]} failed: {proc.stderr.decode('utf-8', 'replace').strip()[:200]}")
    return proc.stdout
