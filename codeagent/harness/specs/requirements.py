"""Requirement files of a repository, cleaned for `pip install -r` in the env image."""

from __future__ import annotations

import re
from typing import Any

from .model import ResolvedSpec

# Yanked from PyPI: replaced the way the official harness does.
REPLACED_REQUIREMENTS = {"types-pkg_resources": "types-setuptools"}
_SKIPPED_LINE = re.compile(r"^\s*(#|-e\s+\.|\.\[test)")


def clean_requirements(text: str, read: Any = None, base: str = "") -> str:
    """A requirements file ready for `pip install -r` outside the repository.

    Drops comments, `-e .` and `.[test...]` lines (the repository is installed later, at its base
    commit), inlines `-r other.txt` (read with `read(path) -> str | None`, relative to `base`, the
    folder of the file being cleaned), and replaces packages yanked from PyPI.
    """
    lines: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or _SKIPPED_LINE.match(stripped):
            continue
        include = re.match(r"^-r\s+(\S+)", stripped) or re.match(r"^--requirement[= ](\S+)", stripped)
        if include:
            if read is None:
                continue
            path = f"{base}/{include.group(1)}" if base else include.group(1)
            nested = read(path)
            if nested is not None:
                lines.append(clean_requirements(nested, read, path.rpartition("/")[0]))
            continue
        name = re.split(r"[<>=!~;\[\s]", stripped, maxsplit=1)[0]
        if name in REPLACED_REQUIREMENTS:
            stripped = REPLACED_REQUIREMENTS[name]
        lines.append(stripped)
    return "\n".join(line for line in lines if line)


def requirements_text(spec: ResolvedSpec, read: Any) -> tuple[str, str] | None:
    """(path, cleaned text) of the first of `spec.requirements` that `read(path)` finds, or None."""
    for path in spec.requirements:
        text = read(path)
        if text is not None:
            return path, clean_requirements(text, read, path.rpartition("/")[0])
    return None
