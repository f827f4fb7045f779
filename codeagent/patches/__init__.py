"""Patches are bytes. One representation everywhere:

- In memory a patch is a `str` decoded from its bytes as UTF-8 with `surrogateescape`: each byte
  that is not UTF-8 (a Latin-1 file, a binary blob) becomes one lone surrogate U+DC80..U+DCFF.
  Text code (splitlines, startswith, difflib) keeps working, and `encode` gives back the exact bytes.
- At every byte boundary (a file, git's stdin, stdout, a sandbox file) encode with `encode()`;
  never `str.encode()` / `write_text()`, which raise on those surrogates.
- In JSON (trajectories, predictions, reports) the same str: `json.dumps` writes a lone surrogate
  as the escape `\\udcXX` and `json.loads` restores it, so the bytes survive. Strict JSON readers
  (pydantic's `model_validate_json`, jq) reject or replace lone surrogates: read with `json.loads`.

What a diff touches and its hunks: parse.py, the one reader of diff text. Base files: base.py.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from .parse import FileDiff, Hunk, files, parse, unquote  # noqa: F401  (the one diff reader, parse.py)

DEFAULT_MAX_BYTES = 5_000_000


def decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def encode(patch: str) -> bytes:
    return patch.encode("utf-8", "surrogateescape")


def is_utf8(patch: str) -> bool:
    try:
        patch.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def size(patch: str) -> int:
    return len(encode(patch))


def digest(patch: str) -> str:
    """sha256 of the patch's bytes: what identifies a prediction."""
    return hashlib.sha256(encode(patch)).hexdigest()


def write(path: str | Path, patch: str) -> Path:
    path = Path(path)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as handle:  # private, as its trajectory
        handle.write(encode(patch))
    return path


def to_stdout(patch: str) -> None:
    sys.stdout.flush()
    stream = getattr(sys.stdout, "buffer", None)
    if stream is None:  # a text-only stream (tests capturing output): the nearest text
        sys.stdout.write(for_display(patch))
        return
    stream.write(encode(patch))
    stream.flush()


def for_display(patch: str) -> str:
    """For a human: undecodable bytes shown as U+FFFD (never for applying)."""
    return encode(patch).decode("utf-8", "replace")


def too_large(patch: str, limit: int | None) -> str | None:
    """A one-line reason when the patch is over `limit` bytes (None or <= 0: no cap), else None."""
    if not limit or limit <= 0:
        return None
    count = size(patch)
    if count <= limit:
        return None
    return (f"the patch is {count:,} bytes, over the cap of {limit:,} (limits.max_patch_bytes); it was not "
            f"stored. Raise the cap (--set limits.max_patch_bytes=N) if the change is meant to be that large")


def safe_relative(path: str) -> bool:
    """A path that stays inside a repository and out of its .git directory."""
    if not path or path.startswith("/") or "\0" in path:
        return False
    parts = path.split("/")
    return not any(part in ("", ".", "..") for part in parts) and parts[0].lower() != ".git" \
        and not any(part.lower() == ".git" for part in parts)


def link_target_escapes(path: str, target: str) -> bool:
    """Whether a symlink at `path` (repo-relative) pointing at `target` leaves the repository."""
    if not target or target.startswith("/") or "\0" in target:
        return True
    resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
    return resolved == ".." or resolved.startswith("../") or resolved.split("/")[0].lower() == ".git"
