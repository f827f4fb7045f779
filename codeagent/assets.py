"""Locate the top-level asset folders (prompts/, tools/, train/, evals/, languages/).

A wheel carries them under codeagent/_assets/; a source checkout has them beside the package.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
ASSET_FOLDERS = ("prompts", "tools", "train", "evals", "languages")


def asset_dir(name: str) -> Path:
    if name not in ASSET_FOLDERS:
        raise ValueError(f"unknown asset folder {name!r}; expected one of {ASSET_FOLDERS}")
    for candidate in (_PACKAGE_DIR / "_assets" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"codeagent's {name}/ folder is missing from this installation; reinstall codeagent"
    )


def asset_path(name: str, *parts: str) -> Path:
    return asset_dir(name).joinpath(*parts)
