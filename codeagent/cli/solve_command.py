"""`codeagent solve` (and `codeagent` alone with its options): the flags, then the TUI or a headless run."""

from __future__ import annotations

import sys

import click

from ..run.scaling_flags import scaling_options, scaling_overrides
from . import _user_errors, cli
from .headless import solve_headless
from .issue import absolute_if_local, attach_images, read_issue_file, task_from_flags


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
def solve(ctx, repo, issue_text, issue_file, example, commit, model_name, api_base, sandbox_kind, headless, as_json,
          json_deltas, apply_patch, config_file, trust, settings, session, last_session, candidates, approval_mode,
          work_mode, images, write_through, tts, select_policy, budget_tokens) -> None:
    """Resolve an issue in a repository; the result is a patch (and a trajectory).

    In a terminal this opens the interactive TUI (type the issue there); --headless or no terminal prints
    progress instead. Exit codes: 0 submitted (or answered), 1 no patch or --apply refused, 2 usage, 3
    configuration or environment, 4 a limit reached, 5 model error, 6 an empty submission, 130 interrupted."""
    from ..config import ConfigError, flag_overrides
    from ..models import ModelConfigError
    from ..trajectory.store import TrajectoryError

    given_above = ctx.obj or {}  # `codeagent --model X solve ...`
    model_name = model_name or given_above.get("model_name")
    api_base = api_base or given_above.get("api_base")
    session = session or ("last" if last_session else None)
    as_json = as_json or json_deltas
    repo = absolute_if_local(repo)  # what sessions record, so `--resume` finds this repository's own
    interactive = not headless and not as_json and sys.stdin.isatty() and sys.stdout.isatty()
    given = sum(map(bool, (issue_text, issue_file, example)))
    if given > 1 or (given == 0 and not session and not interactive) or (session and example):
        raise click.UsageError("give exactly one of --issue, --issue-file or --example")
    try:
        overrides = flag_overrides(list(settings), model__name=model_name, model__api_base=api_base,
                                   sandbox__kind=sandbox_kind, scaling__candidates=candidates, agent__mode=work_mode,
                                   agent__write_through=True if write_through else None,
                                   **scaling_overrides(tts, select_policy, budget_tokens))
    except ConfigError as error:
        raise click.UsageError(str(error)) from None
    with _user_errors(ConfigError, ModelConfigError, TrajectoryError):
        if interactive:
            from ..tui import INSTALL_HINT, tui_available

            if tui_available():
                sys.exit(_solve_in_tui(repo, issue_text, issue_file, example, commit, config_file, overrides,
                                       session, approval_mode, trust, images))
            click.echo(f"({INSTALL_HINT}: running headless)", err=True)
            if not given and not session:
                raise click.UsageError("give --issue, --issue-file or --example (the TUI is not installed)")
        solve_headless(repo, issue_text, issue_file, example, commit, config_file, overrides, session, as_json,
                        apply_patch, trust, images, json_deltas)


def _take_solve_options() -> None:
    """`codeagent --issue X --headless` is `codeagent solve --issue X --headless`: the group takes
    every option of solve (the same objects: one definition, one help text)."""
    cli.params.extend(param for param in solve.params if param.name != "help")


_take_solve_options()


def _solve_in_tui(repo, issue_text, issue_file, example, commit, config_file, overrides, session, mode,
                  trust, images=()) -> int:
    from pathlib import Path

    from ..config import load_config, trust_project, untrusted_settings
    from ..models import ModelConfigError
    from ..run.solve import continue_with_session_model, load_session, resolve_model
    from ..tui import ask_trust, run_tui

    resumed = load_session(load_config(None, None), session, repo) if session else None
    session = resumed.id if resumed else None  # the one found now is the one reopened
    task = None if session else task_from_flags(repo, issue_text, issue_file, example, commit)
    local = (task.repo if task else repo) if Path(task.repo if task else repo).is_dir() else None
    asked = [] if trust or local is None else untrusted_settings(local, config_file, overrides)
    if asked:
        assert local is not None  # only a local repository's settings are asked about
        answer = ask_trust(Path(local).resolve(), asked)
        if answer is None:
            return 130
        if answer:
            click.echo(f"trusted {Path(local).resolve()} (recorded in {trust_project(local)})", err=True)
            trust = True
    config = load_config(local, config_file, overrides, trust=trust)
    if resumed is not None:
        continue_with_session_model(config, resumed, overrides)
    try:
        model, replay = resolve_model(config, example)
    except ModelConfigError:
        model, replay = None, False  # the TUI asks for one (/model NAME)
    follow_up = (issue_text or (read_issue_file(issue_file) if issue_file else None)) if session else None
    if images:
        if task is None and follow_up is None:
            raise click.UsageError("--image goes with --issue or --issue-file (in the TUI, paste the image's path "
                                   "into your message)")
        if model is None:
            raise click.UsageError("--image needs a model that accepts images: give --model")
        if task is not None:
            task = task.model_copy(update={"problem_statement": attach_images(task.problem_statement, images,
                                                                               config, model)})
        else:
            assert follow_up is not None  # checked above
            follow_up = attach_images(follow_up, images, config, model)
    return run_tui(config, model, repo=task.repo if task else repo, commit=commit, task=task, replay=replay,
                   mode=mode, resume=session, follow_up=follow_up)
