"""`codeagent solve --headless`: progress on stderr; on stdout the result (the answer of a run that ended
`answered`, else the patch: `_to_stdout`) or, with --json, the events; an exit code."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from . import EXIT_EMPTY, EXIT_FAILED, EXIT_MODEL, EXIT_OK, _user_errors, exit_code
from .issue import custom_command, follow_up_from_flags, task_from_flags, with_images

if TYPE_CHECKING:
    from ..run.solve_request import PreparedSolve, SolveRequest


def solve_headless(request: SolveRequest) -> None:
    from ..run.model_check import ModelCheck

    prepared = _prepared(request)
    assert prepared.model is not None and prepared.task is not None  # a model is required; headless has a task
    check = ModelCheck(prepared.model)  # the model client's import (seconds) overlaps the rest: the sandbox's start
    _model_checked(check, "connected")  # a server that refuses the connection is told now, in milliseconds
    with_images(prepared, request.images)
    _model_checked(check, "listed")  # and one that does not serve this model, before any sandbox work
    if prepared.config.sandbox.kind == "local":
        click.echo("warning: local sandbox: commands run on this machine with no isolation", err=True)
    if prepared.resumed is None and not request.example:
        from ..run.solve import start_from_working_tree

        with _user_errors():
            prepared.task, started_from = start_from_working_tree(prepared.task)
        if started_from:
            click.echo(f"codeagent · {started_from}", err=True)
    sys.exit(_run_headless(request, prepared, check))


def _prepared(request: SolveRequest) -> PreparedSolve:
    """The shared preparation (run/solve_request.py) for the task the flags or the continued session give; a
    custom command (`/name args`) in the issue or the follow-up expanded."""
    from pathlib import Path

    from ..run.solve_request import find_resumed, prepare_solve
    from ..task import Task

    resumed = find_resumed(request)
    task = Task.model_validate(resumed.task) if resumed else task_from_flags(request)
    assert task is not None  # the flags were checked: an issue, an example or a session
    prepared = prepare_solve(request, task.repo if Path(task.repo).is_dir() else None, resumed=resumed, task=task,
                             follow_up=follow_up_from_flags(request) if resumed else None)
    if prepared.follow_up is not None:
        prepared.follow_up = custom_command(prepared.config, task.repo, prepared.follow_up)
    elif not request.example:
        expanded = custom_command(prepared.config, task.repo, task.problem_statement)
        if expanded != task.problem_statement:  # listed (`--resume`, /resume, view) by what was typed
            prepared.task = task.model_copy(update={"problem_statement": expanded,
                                                    "extra": {**task.extra, "title": task.problem_statement.strip()}})
    return prepared


def _model_checked(check, stage: str | None = None) -> None:
    """The model check up to `stage`: a server that is not there (or a model it cannot run) is one line and
    exit 5 (a configuration the model refuses: exit 3, by the caller's `_user_errors`)."""
    from ..models import ModelConfigError, ModelError
    from ..visible import visible

    try:
        check.wait(stage)
    except ModelConfigError:
        raise
    except ModelError as error:
        click.echo(f"error: {visible(str(error))}", err=True)
        sys.exit(EXIT_MODEL)


def _run_headless(request: SolveRequest, prepared: PreparedSolve, check) -> int:
    """The run, its progress on stderr (or its events on stdout), then its result: the exit code."""
    from ..models import ModelConfigError, ModelError
    from ..run.solve import solve as run_solve
    from ..visible import visible

    task, config, resumed = prepared.task, prepared.config, prepared.resumed
    assert task is not None and prepared.model is not None
    events, writer, told = _listeners(request, prepared)
    if not request.as_json:  # the sandbox takes seconds (its image, once: minutes) before the first event
        click.echo(f"codeagent · preparing the {config.sandbox.kind} sandbox…", err=True)
    if not request.example:  # the repository's toolchain (or sandbox.image), said in one line
        from ..run.repo_env import with_repository_environment

        with _user_errors():
            config = with_repository_environment(config, task.repo, task.base_commit,
                                                 lambda line: click.echo(f"codeagent · {line}", err=True))
    try:
        outcome = run_solve(task, config, prepared.model, events, replay=prepared.replay, resume=resumed,
                            follow_up=prepared.follow_up, answers=True, check=check,
                            history=None if request.example else lambda line: click.echo(f"codeagent · {line}",
                                                                                         err=True))
    except ModelConfigError:
        raise  # exit 3 (_user_errors)
    except ModelError as error:  # the check before any sandbox (a run's own model errors end the run): a
        click.echo(f"error: {visible(str(error))}", err=True)  # server that is not there, one line
        sys.exit(EXIT_MODEL)
    if not request.as_json and not told.written:
        _to_stdout(outcome.result)
    _tell_patch(request, outcome)
    code = exit_code(outcome.result.exit_status)
    if request.apply_patch and outcome.result.patch.strip():
        applied = _apply(request, prepared, outcome, writer)
        code = code or applied
    return code


def _listeners(request: SolveRequest, prepared: PreparedSolve):
    """The run's events: printed (progress, or JSON), written through to the working tree (config
    agent.write_through), the answer on stdout as soon as it is there, telemetry."""
    from pathlib import Path

    from ..events import EventBus
    from ..run.apply import WriteThrough
    from ..run.printers import JsonPrinter, ProgressPrinter
    from ..run.solve import samples_candidates
    from ..run.telemetry import subscribe_telemetry
    from ..sandbox import snapshot

    task, config, resumed = prepared.task, prepared.config, prepared.resumed
    assert task is not None
    several = samples_candidates(config, resumed)
    events = EventBus(JsonPrinter(deltas=request.json_deltas) if request.as_json else ProgressPrinter(compact=several))
    writer = None
    if config.agent.write_through and not request.example and Path(task.repo).is_dir() and not several:
        with _user_errors():
            base = snapshot(task.repo, task.base_commit) if task.base_commit else None
        writer = WriteThrough(task.repo, base, lambda text: click.echo(text, err=True),
                              maybe_applied=resumed.patch if resumed is not None else None)
        events.subscribe(writer)
    told = _AnswerWhenFinished()
    if not request.as_json and not several:
        events.subscribe(told)
    subscribe_telemetry(events)  # CODEAGENT_ENABLE_TELEMETRY=1 (run/telemetry.py)
    return events, writer, told


def _tell_patch(request: SolveRequest, outcome) -> None:
    """Where the patch is (or why there is none) and whether the trajectory was kept whole, on stderr."""
    from ..status import ExitStatus

    result = outcome.result
    if result.record_lost:  # the work is kept all the same: the patch below says where
        click.echo(f"warning: the trajectory was not saved whole: {result.record_lost}", err=True)
    moved = f" (not beside its trajectory: {outcome.patch_moved})" if outcome.patch_moved else ""
    if not result.patch.strip():
        if not request.as_json and result.exit_status != ExitStatus.ANSWERED:
            click.echo("no patch: the run changed no file", err=True)
    elif outcome.patch_file is None:
        click.echo(f"warning: no file could hold the patch{moved}; it is on stdout only", err=True)
    elif not request.as_json or moved:
        click.echo(f"patch written to {outcome.patch_file}{moved}", err=True)
    if result.exit_status == ExitStatus.EMPTY_SUBMISSION and not request.as_json:
        click.echo(f"the agent submitted an empty patch: exit code {EXIT_EMPTY}", err=True)


def _apply(request: SolveRequest, prepared: PreparedSolve, outcome, writer) -> int:
    """--apply: the patch applied to the working tree if safe. 0 when applied, else EXIT_FAILED."""
    from pathlib import Path

    from ..run.apply import apply_patch as apply_to_tree
    from ..sandbox import snapshot

    task, resumed = prepared.task, prepared.resumed
    assert task is not None
    if request.example or not Path(task.repo).is_dir():
        click.echo("--apply: the repository is not a local working tree; use the patch file", err=True)
        return EXIT_FAILED
    base = snapshot(task.repo, task.base_commit) if task.base_commit else None
    earlier = resumed.patch if resumed is not None else None  # perhaps applied already: clean too
    applied = apply_to_tree(task.repo, outcome.result.patch, base=base, maybe_applied=earlier,
                            applied=writer.applied if writer is not None else None)
    click.echo(applied.message + ("" if applied.applied else f"; the patch is in {outcome.patch_file}"), err=True)
    return EXIT_OK if applied.applied else EXIT_FAILED


def _to_stdout(result) -> None:
    """What stdout carries (docs/solve.md's table): a run that ended `answered` (a question, plan mode) its
    answer, as `claude -p` and `codex exec` print theirs, and its patch, if it made one, stays in the patch
    file; any other run its patch, exact bytes when piped (`> fix.patch`), shown and not obeyed on a terminal
    (nothing for a run that changed nothing). Where stdout and stderr are both the terminal, the answer is
    not shown twice: the progress on stderr showed it as it formed."""
    from .. import patches
    from ..status import ExitStatus
    from ..visible import visible

    if result.exit_status == ExitStatus.ANSWERED:
        _write_answer(result.answer)
    elif sys.stdout.isatty():
        click.echo(visible(patches.for_display(result.patch)), nl=False)
    else:
        patches.to_stdout(result.patch)


def _write_answer(answer: str) -> bool:
    from ..visible import visible

    if not answer or (sys.stdout.isatty() and sys.stderr.isatty()):
        return False
    sys.stdout.write((visible(answer) if sys.stdout.isatty() else answer) + "\n")
    sys.stdout.flush()
    return True


class _AnswerWhenFinished:
    """The answer of a run that ended `answered`, on stdout as soon as the run has finished: its sandbox is
    removed after that (a second or more), and the answer need not wait for it."""

    def __init__(self):
        self.written = False

    def __call__(self, event) -> None:
        from ..status import ExitStatus

        if event.kind == "finished" and not self.written and event.exit_status == ExitStatus.ANSWERED:
            _write_answer(event.answer)
            self.written = True
