"""Render the Jinja2 templates in prompts/ (a user folder can override any of them)."""

from __future__ import annotations

import functools
from pathlib import Path

import jinja2

from ..assets import asset_dir
from ..tools.text import truncate_middle


@functools.lru_cache(maxsize=8)
def _environment(override: str | None) -> jinja2.Environment:
    folders = ([override] if override else []) + [str(asset_dir("prompts"))]
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(folders), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=False, autoescape=False)
    env.filters["truncate_middle"] = truncate_middle
    return env


def render(name: str, override_dir: Path | str | None = None, **values) -> str:
    """Render prompts/NAME.j2; a missing variable is an error, not an empty string."""
    template = _environment(str(override_dir) if override_dir else None).get_template(f"{name}.j2")
    return template.render(**values).strip()
