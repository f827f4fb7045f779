"""Files a result brought back from another node (a Ray worker), written under a local folder.
Work that runs elsewhere returns plain data, never paths: its files travel as {relative name: bytes}."""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from pathlib import Path

_ODD = re.compile(r"[^A-Za-z0-9_.-]+")  # a part of a shipped file's name may hold only these


def write_shipped_files(root: Path, files: dict[str, bytes], reserved: Collection[str] = ()) -> None:
    """Write `files` under `root`, every name checked before any is written; the names in `reserved`
    (the folder's own state files) are refused too."""
    targets = [(_inside(root, name, reserved), data) for name, data in files.items()]
    for target, data in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        temporary.write_bytes(data)
        os.replace(temporary, target)


def _inside(root: Path, name: str, reserved: Collection[str]) -> Path:
    """A shipped file's place under `root`; a name that could land elsewhere (or on a reserved file) is refused."""
    parts = name.split("/")
    if not name or name.startswith("/") or "\\" in name or any(p in ("", ".", "..") for p in parts) \
            or name in reserved or any(_ODD.search(p) for p in parts):
        raise ValueError(f"refusing a shipped file named {name!r}")
    return root.joinpath(*parts)
