"""The progress display of `eval grade|run`: a bar for the batch and a line per running instance."""

from __future__ import annotations

from pathlib import Path


def with_progress(total: int, work, out: Path):
    """Run `work(advance)` under a progress bar, with a line per running instance saying what it does
    (cloning, building the environment, running the agent, testing: evals/phases.py) and for how
    long. Not on a terminal, each phase change is printed as a line instead."""
    import threading

    from rich.markup import escape

    # the status names the last instance: the dataset's text, shown and never read as markup or escapes
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TaskID,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    from ..visible import visible
    from .phases import phases_of, running
    from .runner import BatchDir, is_error

    class BarOnly(ProgressColumn):
        """A column of the batch's bar, left empty on an instance's row."""

        def __init__(self, column: ProgressColumn):
            super().__init__()
            self.column = column

        def render(self, task):
            return Text("") if task.fields.get("instance") else self.column.render(task)

    counts = {"resolved": 0, "errors": 0}
    console = stderr_console()
    with Progress(TextColumn("[bold]{task.description}"), BarOnly(BarColumn()), BarOnly(MofNCompleteColumn()),
                  BarOnly(TimeElapsedColumn()), TextColumn("{task.fields[status]}", markup=False), transient=False,
                  console=console) as progress:
        bar = progress.add_task("instances", total=total, status="")
        rows: dict[str, TaskID] = {}  # instance -> its progress row
        printed: dict[str, int] = {}  # instance -> how many of its phases were printed (not on a terminal)
        lock = threading.Lock()  # the watcher thread and the results both update the rows
        done = threading.Event()

        def show_phases(finished: str | None = None) -> None:
            with lock:
                now = {instance_id: (phases[-1], seconds)
                       for instance_id, (phases, seconds) in running(out / "instances").items()}
                if not console.is_terminal:
                    for instance_id in now:
                        _print_new(instance_id, phases_of(out / "instances" / instance_id))
                    if finished:  # the phases it went through since the last look
                        _print_new(finished, phases_of(BatchDir(out).instance(finished).root))
                for instance_id, (phase, seconds) in now.items():
                    if instance_id not in rows:
                        rows[instance_id] = progress.add_task(f"  {escape(visible(instance_id))}", total=None, status="", start=False,
                                                              instance=True)
                    progress.update(rows[instance_id], status=f"{phase} · {_minutes(seconds)}")
                for instance_id in [i for i in rows if i not in now]:
                    progress.remove_task(rows.pop(instance_id))

        def _print_new(instance_id: str, phases: list[str]) -> None:
            for phase in phases[printed.get(instance_id, 0):]:
                console.print(visible(f"[{instance_id}] {phase}"), markup=False, highlight=False)
            printed[instance_id] = max(printed.get(instance_id, 0), len(phases))

        def watch() -> None:
            while not done.wait(0.5):
                show_phases()

        def advance(report: dict) -> None:
            counts["resolved"] += bool(report.get("resolved"))
            counts["errors"] += is_error(report)
            show_phases(finished=report.get("instance_id"))
            progress.update(bar, advance=1, status=visible(f"resolved {counts['resolved']} · errors "
                                                   f"{counts['errors']} · last {report.get('instance_id')}"))

        watcher = threading.Thread(target=watch, name="eval-phases", daemon=True)
        watcher.start()
        try:
            return work(advance)
        finally:
            done.set()
            watcher.join()
            with lock:
                for row in rows.values():
                    progress.remove_task(row)


def _minutes(seconds: float) -> str:
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


def stderr_console():
    from rich.console import Console

    return Console(stderr=True)
