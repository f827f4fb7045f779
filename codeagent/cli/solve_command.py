"""`codeagent solve` (and `codeagent` alone with its options): the flags read once into a `SolveRequest`
(run/solve_request.py), then the TUI or a headless run (headless.py), both prepared by `prepare_solve`."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

import click

from ..run.scaling_flags import scaling_options, scaling_overrides
from ..run.solve_request import SolveRequest
from . import _user_errors, cli
from .headless import solve_headless
from .issue import absolute_if_local, follow_up_from_flags, task_from_flags, with_images


@cli.command()
@click.option("--repo", type=str, default=".", show_default=True, help="The repository (path, mirror or URL).")
@click.option("--issue", "issue_text", type=str, help="The issue to resolve, as text.")
@click.option("--issue-file", type=click.Path(exists=True, dir_okay=False, allow_dash=True),
              help="The issue, from a file (-: standard input).")
@click.option("--example", type=str, help="Solve a bundled example task (e.g. cart) instead.")
@click.option("--commit", type=str, help="Start from this commit (default: your working tree, uncommitted edits "
              "included).")
@click.option("--model", "model_name", type=str, help="litellm model id, or replay:TRAJECTORY.")
@click.option("--api-base", type=str, help="Base URL of an OpenAI-compatible server (vLLM, ollama...).")
@click.option("--sandbox", "sandbox_kind", type=click.Choice(["docker", "local"]), help="local: NO isolation.")
@click.option("--headless", is_flag=True, help="No TUI: print progress (always so without a terminal).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON event per line on stdout.")
@click.option("--json-deltas", is_flag=True, help="With --json (implied): also the reply as it forms (model_delta, "
              "model_waiting events).")
@click.option("--apply", "apply_patch", is_flag=True, help="Apply the patch to the working tree if safe.")
@click.option("--write-through", is_flag=True, help="Write each change the agent makes to your working tree as it "
              "happens (TUI: /undo puts it back); config agent.write_through.")
@click.option("--config", "config_file", type=str, help="A config file (YAML), over the user and project ones.")
@click.option("--trust", is_flag=True, help="Trust the repository's .codeagent.yaml: let it set the model, its "
              "endpoint, the sandbox... (untrusted, only harmless settings apply).")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE", help="Override a setting, e.g. limits.max_steps=20.")
@click.option("--resume", "session", metavar="[ID]", is_flag=False, flag_value="last",
              help="Continue a session (a trajectory id; alone: this repository's latest); --issue gives the follow-up.")
@click.option("--last", "last_session", is_flag=True, help="Same as --resume alone.")
@click.option("--candidates", type=int, help="Sample N solutions in parallel and pick one with verifiers.")
@scaling_options
@click.option("--approval-mode", type=click.Choice(["suggest", "auto-edit", "full-auto"]), default="suggest",
              show_default=True, help="TUI: ask before commands and edits, before commands only, or never.")
@click.option("--mode", "work_mode", type=click.Choice(["normal", "plan"]), help="plan: read-only tools, the agent "
              "explains or plans in plain text and changes nothing (TUI: /plan or Ctrl-T switches).")
@click.option("--image", "images", multiple=True, metavar="PATH", help="Attach an image (PNG, JPEG, GIF, WebP) to "
              "the issue, for a model that accepts images. Repeatable.")
@click.pass_context
def solve(ctx: click.Context, **flags) -> None:
    """Resolve an issue in a repository; the result is a patch (and a trajectory).

    In a terminal this opens the interactive TUI (type the issue there); --headless or no terminal prints
    progress instead. Exit codes: 0 submitted (or answered), 1 no patch or --apply refused, 2 usage, 3
    configuration or environment, 4 a limit reached, 5 model error, 6 an empty submission, 130 interrupted."""
    from ..config import ConfigError
    from ..models import ModelConfigError
    from ..trajectory.store import TrajectoryError

    request = request_from_flags(flags, given_above=ctx.obj or {})
    with _user_errors(ConfigError, ModelConfigError, TrajectoryError):
        if request.interactive:
            from ..tui import INSTALL_HINT, tui_available

            if tui_available():
                sys.exit(_solve_in_tui(request))
            click.echo(f"({INSTALL_HINT}: running headless)", err=True)
            if not (request.issue_text or request.issue_file or request.example or request.session):
                raise click.UsageError("give --issue, --issue-file or --example (the TUI is not installed)")
        solve_headless(request)


def request_from_flags(flags: dict[str, Any], given_above: dict[str, Any]) -> SolveRequest:
    """The request, read once from solve's flags (and `codeagent --model X solve`'s, `given_above`); a usage
    error (exit 2) for flags that do not go together or a bad --set."""
    from ..config import ConfigError, flag_overrides

    as_json = flags["as_json"] or flags["json_deltas"]
    session = flags["session"] or ("last" if flags["last_session"] else None)
    interactive = not flags["headless"] and not as_json and sys.stdin.isatty() and sys.stdout.isatty()
    given = sum(map(bool, (flags["issue_text"], flags["issue_file"], flags["example"])))
    if given > 1 or (given == 0 and not session and not interactive) or (session and flags["example"]):
        raise click.UsageError("give exactly one of --issue, --issue-file or --example")
    try:
        overrides = flag_overrides(
            list(flags["settings"]), model__name=flags["model_name"] or given_above.get("model_name"),
            model__api_base=flags["api_base"] or given_above.get("api_base"), sandbox__kind=flags["sandbox_kind"],
            scaling__candidates=flags["candidates"], agent__mode=flags["work_mode"],
            agent__write_through=True if flags["write_through"] else None,
            **scaling_overrides(flags["tts"], flags["select_policy"], flags["budget_tokens"]))
    except ConfigError as error:
        raise click.UsageError(str(error)) from None
    return SolveRequest(  # the repository as sessions record it, so that `--resume` finds this one's own
        repo=absolute_if_local(flags["repo"]), overrides=overrides, config_file=flags["config_file"],
        trust=flags["trust"], issue_text=flags["issue_text"], issue_file=flags["issue_file"],
        example=flags["example"], commit=flags["commit"], session=session, images=tuple(flags["images"]),
        approval_mode=flags["approval_mode"], interactive=interactive, as_json=as_json,
        json_deltas=flags["json_deltas"], apply_patch=flags["apply_patch"])


def _take_solve_options() -> None:
    """`codeagent --issue X --headless` is `codeagent solve --issue X --headless`: the group takes
    every option of solve (the same objects: one definition, one help text)."""
    cli.params.extend(param for param in solve.params if param.name != "help")


_take_solve_options()


def _solve_in_tui(request: SolveRequest) -> int:
    """The TUI on the request: a repository whose settings are not trusted yet is asked about first; without
    a model, the TUI opens all the same and asks for one (/model NAME)."""
    from pathlib import Path

    from ..config import trust_project, untrusted_settings
    from ..run.solve_request import find_resumed, prepare_solve
    from ..tui import ask_trust, run_tui

    resumed = find_resumed(request)
    session = resumed.id if resumed else None  # the one found now is the one reopened
    task = None if session else task_from_flags(request)
    repo = task.repo if task else request.repo
    local = repo if Path(repo).is_dir() else None
    asked = [] if request.trust or local is None else untrusted_settings(local, request.config_file,
                                                                         request.overrides)
    if asked:
        assert local is not None  # only a local repository's settings are asked about
        answer = ask_trust(Path(local).resolve(), asked)
        if answer is None:
            return 130
        if answer:
            click.echo(f"trusted {Path(local).resolve()} (recorded in {trust_project(local)})", err=True)
            request = replace(request, trust=True)
    follow_up = follow_up_from_flags(request) if session else None
    prepared = prepare_solve(request, local, resumed=resumed, task=task, follow_up=follow_up, model_required=False)
    if request.images and task is None and follow_up is None:
        raise click.UsageError("--image goes with --issue or --issue-file (in the TUI, paste the image's path "
                               "into your message)")
    with_images(prepared, request.images)
    return run_tui(prepared.config, prepared.model, repo=repo, commit=request.commit, task=prepared.task,
                   replay=prepared.replay, mode=request.approval_mode, resume=session, follow_up=prepared.follow_up)
