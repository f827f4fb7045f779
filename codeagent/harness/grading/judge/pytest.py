"""The judge's part for pytest: codeagent's pytest plugin (../guard.py and ../pytest_guard_plugin.py)
behind the judge's contract."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..guard import Guard, evidence
from ..verdict import PYTEST_PARSERS
from . import Context, register


@register
class PytestObserver:
    name = "pytest"

    def __init__(self) -> None:
        self.guard: Guard | None = None

    def install(self, context: Context) -> str:
        self.guard = Guard(context.box, context.folder)
        return self.guard.install()

    def collect(self, context: Context) -> dict[str, Any]:
        assert self.guard is not None, "install() first"
        return {**self.guard.collect(), "parser": context.log_parser}

    def evidence(self, seen: dict[str, Any], log: str, listed: Sequence[str], exit_code: int | None) -> list[str]:
        parser = seen.get("parser", "")
        return evidence(seen, parser, log, list(listed)) if parser in PYTEST_PARSERS else []
