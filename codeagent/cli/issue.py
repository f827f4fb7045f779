"""What a solve is asked: the issue from the flags or a file, a custom command (`/name args`), attached images."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from . import EXIT_USAGE

if TYPE_CHECKING:
    from ..run.solve_request import PreparedSolve, SolveRequest
    from ..task import Task


def task_from_flags(request: SolveRequest) -> Task | None:
    """The task the flags give (--example, --issue, --issue-file); None when they give none."""
    from ..task import Task

    if request.example:
        from ..run.examples import example_as_task

        return example_as_task(request.example)
    if not (request.issue_text or request.issue_file):
        return None
    text = request.issue_text or read_issue_file(str(request.issue_file))  # one of them is given
    if not text.strip():
        raise click.UsageError("the issue text is empty")
    return Task(repo=request.repo, problem_statement=text, base_commit=request.commit)


def follow_up_from_flags(request: SolveRequest) -> str | None:
    """A continued session's next message: --issue or --issue-file, else None."""
    return request.issue_text or (read_issue_file(request.issue_file) if request.issue_file else None)


def absolute_if_local(repo: str) -> str:
    from pathlib import Path

    path = Path(repo).expanduser()
    return str(path.resolve()) if path.is_dir() else repo


def read_issue_file(path: str) -> str:
    if path == "-":
        data = sys.stdin.buffer.read()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise click.BadParameter("standard input is not UTF-8 text", param_hint="--issue-file") from None
    try:
        return open(path, encoding="utf-8").read()
    except UnicodeDecodeError:
        raise click.BadParameter(f"{path} is not UTF-8 text", param_hint="--issue-file") from None
    except OSError as error:
        raise click.BadParameter(f"{path}: {error.strerror or error}", param_hint="--issue-file") from None


def custom_command(config, repo: str, text: str) -> str:
    """`/name args` naming a custom command (run/commands.py): its body, rendered; its allowed-tools
    become the tools this run offers. Any other text is returned as it is."""
    if not text.lstrip().startswith("/"):
        return text  # before the imports: a session's modules are not on a plain issue's path (the model check)
    from pathlib import Path

    from ..run.commands import custom_commands, find_command
    from ..run.session.slash import COMMANDS
    from ..tools.registry import available_tools

    commands = custom_commands(config, repo if Path(repo).is_dir() else None, reserved=COMMANDS,
                               warn=lambda line: click.echo(line, err=True))
    found = find_command(commands, text)
    if found is None:
        return text
    command, arguments = found
    click.echo(f"codeagent · /{command.name} from {command.source}", err=True)
    if command.allowed_tools:
        config.agent.tools = command.tool_names(config.agent.tools or available_tools())
    return command.render(arguments)


def with_images(prepared: PreparedSolve, paths: tuple[str, ...]) -> None:
    """The images attached to the message the run starts with: a continued session's follow-up, else the
    task's issue (a usage error without a model: the TUI's /model comes too late for them)."""
    if not paths:
        return
    if prepared.model is None:
        raise click.UsageError("--image needs a model that accepts images: give --model")
    if prepared.follow_up is not None:
        prepared.follow_up = attach_images(prepared.follow_up, paths, prepared.config, prepared.model)
    elif prepared.task is not None:
        prepared.task = prepared.task.model_copy(update={"problem_statement": attach_images(
            prepared.task.problem_statement, paths, prepared.config, prepared.model)})


def attach_images(text: str, paths, config, model) -> str:
    """The message with the images' markers (agent/images.py); a model that takes no images, or a
    file that is not an image or too large, is a one-line usage error (exit 2) before anything runs."""
    from ..agent.images import ImageError, attach, store_image
    from ..models.vision import image_refusal
    from ..trajectory.store import TrajectoryStore

    refused = image_refusal(model)
    root = TrajectoryStore(config.trajectory_root()).root
    try:
        if refused:
            raise ImageError(refused)
        return attach(text, [store_image(path, root) for path in paths])
    except (ImageError, OSError) as error:  # one line, before any sandbox is built
        click.echo(f"error: --image: {error}", err=True)
        sys.exit(EXIT_USAGE)
