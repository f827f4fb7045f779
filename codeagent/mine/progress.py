"""What a mining run shows while it works. On a terminal: bars of the commits scanned, the candidates
found and the candidates validated, and a row per candidate being validated with its phase
(environment, base run 2/3, grade gold...). Not on a terminal, or under CI (`CI` set): one plain line
per event on stderr, the record a log keeps."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any


def live_wanted(console) -> bool:
    return bool(console.is_terminal) and not os.environ.get("CI")


class MiningProgress:
    """Use as a context manager; every method may be called from any thread."""

    def __init__(self, console=None):
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self.live = live_wanted(self.console)
        self._lock = threading.Lock()
        self._rows: dict[str, Any] = {}  # candidate -> its row
        self._progress: Any = None
        self._bars: dict[str, Any] = {}
        self.counts = {"kept": 0, "skipped": 0}
        self._found = 0  # candidates found while scanning

    def __enter__(self) -> MiningProgress:
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn("{task.description}"), *(_BarsOnly(column) for column in (
                BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())), TextColumn("{task.fields[status]}", markup=False),
                console=self.console, transient=False)
            self._progress.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        if self._progress is not None:
            with self._lock:
                for row in self._rows.values():
                    self._progress.remove_task(row)
                self._rows.clear()
            self._progress.__exit__(*exc_info)

    def line(self, text: str) -> None:
        """A line kept in the output either way (a summary, an error)."""
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=sys.stderr, flush=True)

    def scanning(self, commits: int) -> None:
        if self._progress is not None:
            self._bars["scan"] = self._progress.add_task("commits scanned", total=commits, status="")
            self._bars["found"] = self._progress.add_task("candidates", total=commits, status="")

    def scanned(self, sha: str, skipped: str | None, resumed: bool = False) -> None:
        """One commit split and checked: a candidate (skipped None) or skipped with the reason; `resumed`:
        a previous run recorded it."""
        if self._progress is None:
            if skipped is not None:
                self.line(f"[{sha[:10]}] skipped (candidate): {skipped}")
            return
        self._progress.update(self._bars["scan"], advance=1, status=f"{sha[:10]}")
        if skipped is None and not resumed:
            self._found += 1
            self._progress.update(self._bars["found"], advance=1)

    def validating(self, candidates: int) -> None:
        if self._progress is not None:
            self._progress.update(self._bars["found"], total=self._found)
            self._bars["valid"] = self._progress.add_task("validated", total=candidates, status="")

    def phase(self, sha: str, text: str) -> None:
        """A candidate being validated entered a phase (`sha`: its commit, whole or shortened)."""
        key = sha[:10]
        if self._progress is None:
            self.line(f"[{key}] {text}")
            return
        with self._lock:
            if key not in self._rows:
                self._rows[key] = self._progress.add_task(f"  {key}", total=None, status="", start=False,
                                                          candidate=True)
            self._progress.update(self._rows[key], status=text)

    def validated(self, sha: str, kept: bool, text: str) -> None:
        """A candidate finished: kept or skipped, `text` says how or why; its row goes."""
        key = sha[:10]
        self.counts["kept" if kept else "skipped"] += 1
        if self._progress is None:
            self.line(f"[{key}] {text}")
            return
        with self._lock:
            if key in self._rows:
                self._progress.remove_task(self._rows.pop(key))
        self._progress.update(self._bars["valid"], advance=1,
                              status=f"kept {self.counts['kept']} · skipped {self.counts['skipped']}")


def _BarsOnly(column):
    """`column` on the bars; empty on a candidate's row (its phase is all it shows)."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class BarsOnly(ProgressColumn):
        def render(self, task):
            return Text("") if task.fields.get("candidate") else column.render(task)

    return BarsOnly()
