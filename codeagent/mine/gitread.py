"""Reading a repository that may be hostile. What it holds (messages, file names, ref names) is data,
never an option or a record separator:

- object ids are checked as full hexadecimal ids before they reach a command line, and again when they
  come back from one;
- every revision argument follows `--end-of-options` (`--output=FILE` is then a revision git cannot find,
  not an option that writes FILE);
- records come from output whose fields git writes itself (ids, dates) or whose lengths git states
  (`cat-file --batch`), or from NUL-separated output (`-z`): never from separators a message may hold.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from ..data.ids import OBJECT_ID

END = "--end-of-options"
# Never run a program the repository's configuration or attributes name while reading it.
SAFE_DIFF = ("--no-ext-diff", "--no-textconv")


def object_id(text: str) -> str:
    """`text` when it is a full object id; ValueError otherwise."""
    if not isinstance(text, str) or not OBJECT_ID.fullmatch(text):
        raise ValueError(f"not a git object id: {str(text)[:80]!r}")
    return text


def git_bytes(git_dir: Path, *args: str, stdin: bytes | None = None) -> bytes:
    proc = subprocess.run(["git", "--git-dir", str(git_dir), *args], input=stdin, capture_output=True)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)[:300]}: {proc.stderr.decode(errors='replace').strip()[-300:]}")
    return proc.stdout


def git(git_dir: Path, *args: str) -> str:
    return git_bytes(git_dir, *args).decode("utf-8", "replace")


def commit_messages(git_dir: Path, shas: list[str]) -> dict[str, str]:
    """Each commit's message (as `%B` gives it: decoded by its `encoding` header, UTF-8 otherwise), read by
    `git cat-file --batch`, whose output states each object's length: a message may hold any byte."""
    if not shas:
        return {}
    names = "".join(object_id(sha) + "\n" for sha in shas).encode()
    out = git_bytes(git_dir, "cat-file", "--batch", stdin=names)
    messages: dict[str, str] = {}
    position = 0
    for sha in shas:
        newline = out.index(b"\n", position)
        header = out[position:newline].decode("ascii", "replace").split(" ")
        if len(header) != 3 or header[0] != sha or header[1] != "commit" or not header[2].isdigit():
            raise RuntimeError(f"git cat-file: unexpected record for {sha}: {' '.join(header)[:120]!r}")
        start = newline + 1
        end = start + int(header[2])
        messages[sha] = message_of(out[start:end])
        position = end + 1  # the newline after each object
    return messages


def message_of(raw: bytes) -> str:
    """The message of a raw commit object: what follows its headers (the first empty line)."""
    head, _, body = raw.partition(b"\n\n")
    encoding = "utf-8"
    for line in head.split(b"\n"):
        if line.startswith(b"encoding "):
            encoding = line[len(b"encoding "):].decode("ascii", "replace").strip()
    try:
        return body.decode(encoding)
    except (LookupError, UnicodeDecodeError):  # an unknown or a lying `encoding` header
        return body.decode("utf-8", "replace")
