"""`codeagent solve --headless`: progress on stderr; on stdout the result (the answer of a run that ended
`answered`, else the patch: `_to_stdout`) or, with --json, the events; an exit code."""

from __future__ import annotations

import sys

import click

from . import EXIT_EMPTY, EXIT_FAILED, EXIT_MODEL, EXIT_OK, _user_errors, exit_code
from .issue import attach_images, custom_command, read_issue_file, task_from_flags


def solve_headless(repo, issue_text, issue_file, example, commit, config_file, overrides, session, as_json,
                    apply_patch, trust, images=(), json_deltas=False) -> None:
    from pathlib import Path

    from ..config import load_config
    from ..run.model_check import ModelCheck, resolve_model
    from ..task import Task

    resumed = None
    if session:
        from ..run.solve import load_session

        resumed = load_session(load_config(None, None), session, repo)
    task = Task.model_validate(resumed.task) if resumed else task_from_flags(repo, issue_text, issue_file, example, commit)
    follow_up = (issue_text or (read_issue_file(issue_file) if issue_file else None)) if resumed else None
    config = load_config(task.repo if Path(task.repo).is_dir() else None, config_file, overrides, trust=trust)
    if resumed is not None:
        from ..run.solve import continue_with_session_model

        continue_with_session_model(config, resumed, overrides)
    if follow_up is not None:
        follow_up = custom_command(config, task.repo, follow_up)
    elif not example:
        expanded = custom_command(config, task.repo, task.problem_statement)
        if expanded != task.problem_statement:  # listed (`--resume`, /resume, view) by what was typed
            task = task.model_copy(update={"problem_statement": expanded,
                                           "extra": {**task.extra, "title": task.problem_statement.strip()}})
    model, replay = resolve_model(config, example)
    check = ModelCheck(model)  # the model client's import (seconds) overlaps the rest: the sandbox's start
    _model_checked(check, "connected")  # a server that refuses the connection is told now, in milliseconds
    _run_headless(task, config, model, replay, check, example, resumed, follow_up, as_json, json_deltas,
                  apply_patch, images)


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


def _run_headless(task, config, model, replay, check, example, resumed, follow_up, as_json, json_deltas,
                  apply_patch, images) -> None:
    from pathlib import Path

    from ..events import EventBus
    from ..models import ModelConfigError, ModelError
    from ..run.apply import WriteThrough
    from ..run.apply import apply_patch as apply_to_tree
    from ..run.printers import JsonPrinter, ProgressPrinter
    from ..run.solve import samples_candidates, start_from_working_tree
    from ..run.solve import solve as run_solve
    from ..run.telemetry import subscribe_telemetry
    from ..sandbox import snapshot
    from ..status import ExitStatus
    from ..visible import visible

    if images and follow_up is not None:
        follow_up = attach_images(follow_up, images, config, model)
    elif images:
        task = task.model_copy(update={"problem_statement": attach_images(task.problem_statement, images, config,
                                                                           model)})
    _model_checked(check, "listed")  # and one that does not serve this model, before any sandbox work
    if config.sandbox.kind == "local":
        click.echo("warning: local sandbox: commands run on this machine with no isolation", err=True)
    if resumed is None and not example:
        with _user_errors():
            task, started_from = start_from_working_tree(task)
        if started_from:
            click.echo(f"codeagent · {started_from}", err=True)
    events = EventBus(JsonPrinter(deltas=json_deltas) if as_json else ProgressPrinter(compact=samples_candidates(config, resumed)))
    writer = None
    if config.agent.write_through and not example and Path(task.repo).is_dir() and \
            not samples_candidates(config, resumed):
        with _user_errors():
            base = snapshot(task.repo, task.base_commit) if task.base_commit else None
        writer = WriteThrough(task.repo, base, lambda text: click.echo(text, err=True),
                              maybe_applied=resumed.patch if resumed is not None else None)
        events.subscribe(writer)
    told = _AnswerWhenFinished()
    if not as_json and not samples_candidates(config, resumed):
        events.subscribe(told)
    subscribe_telemetry(events)  # CODEAGENT_ENABLE_TELEMETRY=1 (run/telemetry.py)
    if not as_json:  # the sandbox takes seconds (its image, once: minutes) before the first event
        click.echo(f"codeagent · preparing the {config.sandbox.kind} sandbox…", err=True)
    if not example:  # the repository's toolchain (or sandbox.image), said in one line
        from ..run.repo_env import with_repository_environment

        with _user_errors():
            config = with_repository_environment(config, task.repo, task.base_commit,
                                                 lambda line: click.echo(f"codeagent · {line}", err=True))
    try:
        outcome = run_solve(task, config, model, events, replay=replay, resume=resumed, follow_up=follow_up,
                            answers=True, check=check,
                            history=None if example else lambda line: click.echo(f"codeagent · {line}", err=True))
    except ModelConfigError:
        raise  # exit 3 (_user_errors)
    except ModelError as error:  # the check before any sandbox (a run's own model errors end the run): a
        click.echo(f"error: {visible(str(error))}", err=True)  # server that is not there, one line
        sys.exit(EXIT_MODEL)
    result = outcome.result
    answered = result.exit_status == ExitStatus.ANSWERED
    if not as_json and not told.written:
        _to_stdout(result)
    if result.record_lost:  # the work is kept all the same: the patch below says where
        click.echo(f"warning: the trajectory was not saved whole: {result.record_lost}", err=True)
    moved = f" (not beside its trajectory: {outcome.patch_moved})" if outcome.patch_moved else ""
    if not result.patch.strip():
        if not as_json and not answered:
            click.echo("no patch: the run changed no file", err=True)
    elif outcome.patch_file is None:
        click.echo(f"warning: no file could hold the patch{moved}; it is on stdout only", err=True)
    elif not as_json or moved:
        click.echo(f"patch written to {outcome.patch_file}{moved}", err=True)
    if result.exit_status == ExitStatus.EMPTY_SUBMISSION and not as_json:
        click.echo(f"the agent submitted an empty patch: exit code {EXIT_EMPTY}", err=True)
    code = exit_code(result.exit_status)
    if apply_patch and result.patch.strip():
        if example or not Path(task.repo).is_dir():
            click.echo("--apply: the repository is not a local working tree; use the patch file", err=True)
            code = code or EXIT_FAILED
        else:
            base = snapshot(task.repo, task.base_commit) if task.base_commit else None
            earlier = resumed.patch if resumed is not None else None  # perhaps applied already: clean too
            applied = apply_to_tree(task.repo, result.patch, base=base, maybe_applied=earlier,
                                    applied=writer.applied if writer is not None else None)
            click.echo(applied.message + ("" if applied.applied else f"; the patch is in {outcome.patch_file}"), err=True)
            code = code or (EXIT_OK if applied.applied else EXIT_FAILED)
    sys.exit(code)


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
