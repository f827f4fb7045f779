"""The `codeagent` command. Heavy modules are imported inside commands: `--help` stays instant."""

from __future__ import annotations

import signal
import sys

import click

from . import __version__
from .interrupts import forget_handled_interrupt

# The exit codes of `codeagent solve` (documented in the README): 0 a patch was submitted (and
# applied, with --apply), or in plan mode the agent answered; 1 the run ended without one, or --apply refused; 2 a usage error; 3 the
# configuration or the environment (no model or key, Docker, a bad setting); 4 a limit was reached;
# 5 the model failed (unreachable, rejected the request); 6 the agent submitted an empty patch (it changed
# nothing: CI tells that from a fix); 130 interrupted (Ctrl-C).
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_LIMIT, EXIT_MODEL, EXIT_EMPTY = 0, 1, 2, 3, 4, 5, 6
EXIT_INTERRUPTED = 130


def exit_code(status: str) -> int:
    """The process's exit code for a run's exit status."""
    from .status import LIMITS, ExitStatus

    if status in (ExitStatus.SUBMITTED, ExitStatus.ANSWERED):  # answered: a plain reply, the agent's answer
        return EXIT_OK
    if status == ExitStatus.EMPTY_SUBMISSION:
        return EXIT_EMPTY
    if status in LIMITS:
        return EXIT_LIMIT
    if status == ExitStatus.MODEL_ERROR:
        return EXIT_MODEL
    if status == ExitStatus.INTERRUPTED:
        return EXIT_INTERRUPTED
    return EXIT_FAILED


class _Group(click.Group):
    """Ctrl-C at any moment (imports, the model check, the sandbox being built, a run) exits 130, not with
    click's `Aborted!` and 1; the sandboxes unwind on the way out (with statements, atexit), and any
    container of this process left half made is removed."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            forget_handled_interrupt()
            click.echo("interrupted", err=True)
            _remove_own_sandboxes()
            ctx.exit(EXIT_INTERRUPTED)


def _remove_own_sandboxes() -> None:
    """Containers of this process that no `with` closed: one whose creation Ctrl-C cut (the engine made
    it, the answer never came)."""
    if "codeagent.sandbox.docker" not in sys.modules:
        return  # no Docker sandbox was started
    from .sandbox.docker import close_all
    from .sandbox.prune import remove_own

    close_all()
    try:
        remove_own()
    except Exception:  # noqa: BLE001 - the engine went away: `codeagent sandbox prune` removes them later
        pass


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]}, invoke_without_command=True)
@click.version_option(__version__, prog_name="codeagent")
@click.pass_context
def cli(ctx: click.Context, **options) -> None:
    """codeagent: resolves issues in your repository from a Docker sandbox, and learns from it.

    Without a command: `codeagent solve` with these options (in a terminal, the TUI in the current
    repository). `codeagent doctor` checks the set-up."""
    ctx.obj = {"model_name": options["model_name"], "api_base": options["api_base"]}  # `codeagent --model X solve`
    given = [name for name in options if ctx.get_parameter_source(name) != click.core.ParameterSource.DEFAULT]
    if ctx.invoked_subcommand is None:
        if given or (sys.stdin.isatty() and sys.stdout.isatty()):
            ctx.invoke(solve, **options)
        else:
            click.echo(ctx.get_help())
        return
    misplaced = [name for name in given if name not in ("model_name", "api_base")]
    if misplaced or (given and ctx.invoked_subcommand not in ("solve", "doctor")):
        flags = ", ".join(_flag_of(name) for name in (misplaced or given))
        raise click.UsageError(f"{flags}: solve's options go after `codeagent solve`, or with `codeagent` alone "
                               f"(not before `{ctx.invoked_subcommand}`)")


# -- solve -----------------------------------------------------------------------------------------

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
@click.option("--approval-mode", type=click.Choice(["suggest", "auto-edit", "full-auto"]), default="suggest",
              show_default=True, help="TUI: ask before commands and edits, before commands only, or never.")
@click.option("--mode", "work_mode", type=click.Choice(["normal", "plan"]), help="plan: read-only tools, the agent "
              "explains or plans in plain text and changes nothing (TUI: /plan or Ctrl-T switches).")
@click.option("--image", "images", multiple=True, metavar="PATH", help="Attach an image (PNG, JPEG, GIF, WebP) to "
              "the issue, for a model that accepts images. Repeatable.")
@click.pass_context
def solve(ctx, repo, issue_text, issue_file, example, commit, model_name, api_base, sandbox_kind, headless, as_json,
          json_deltas, apply_patch, config_file, trust, settings, session, last_session, candidates, approval_mode,
          work_mode, images, write_through) -> None:
    """Resolve an issue in a repository; the result is a patch (and a trajectory).

    In a terminal this opens the interactive TUI (type the issue there); --headless or no terminal prints
    progress instead. Exit codes: 0 submitted (or answered), 1 no patch or --apply refused, 2 usage, 3
    configuration or environment, 4 a limit reached, 5 model error, 6 an empty submission, 130 interrupted."""
    from .config import ConfigError, flag_overrides
    from .models import ModelConfigError
    from .trajectory.store import TrajectoryError

    given_above = ctx.obj or {}  # `codeagent --model X solve ...`
    model_name = model_name or given_above.get("model_name")
    api_base = api_base or given_above.get("api_base")
    session = session or ("last" if last_session else None)
    as_json = as_json or json_deltas
    repo = _absolute_if_local(repo)  # what sessions record, so `--resume` finds this repository's own
    interactive = not headless and not as_json and sys.stdin.isatty() and sys.stdout.isatty()
    given = sum(map(bool, (issue_text, issue_file, example)))
    if given > 1 or (given == 0 and not session and not interactive) or (session and example):
        raise click.UsageError("give exactly one of --issue, --issue-file or --example")
    try:
        overrides = flag_overrides(list(settings), model__name=model_name, model__api_base=api_base,
                                   sandbox__kind=sandbox_kind, scaling__candidates=candidates, agent__mode=work_mode,
                                   agent__write_through=True if write_through else None)
    except ConfigError as error:
        raise click.UsageError(str(error)) from None
    with _user_errors(ConfigError, ModelConfigError, TrajectoryError):
        if interactive:
            from .tui import INSTALL_HINT, tui_available

            if tui_available():
                sys.exit(_solve_in_tui(repo, issue_text, issue_file, example, commit, config_file, overrides,
                                       session, approval_mode, trust, images))
            click.echo(f"({INSTALL_HINT}: running headless)", err=True)
            if not given and not session:
                raise click.UsageError("give --issue, --issue-file or --example (the TUI is not installed)")
        _solve_headless(repo, issue_text, issue_file, example, commit, config_file, overrides, session, as_json,
                        apply_patch, trust, images, json_deltas)


def _take_solve_options() -> None:
    """`codeagent --issue X --headless` is `codeagent solve --issue X --headless`: the group takes
    every option of solve (the same objects: one definition, one help text)."""
    cli.params.extend(param for param in solve.params if param.name != "help")


def _flag_of(name: str) -> str:
    return next(param.opts[0] for param in cli.params if param.name == name)


_take_solve_options()


def _task_from_flags(repo, issue_text, issue_file, example, commit):
    from .task import Task

    if example:
        from .run.examples import example_as_task

        return example_as_task(example)
    if not (issue_text or issue_file):
        return None
    text = issue_text or _read_issue_file(issue_file)
    if not text.strip():
        raise click.UsageError("the issue text is empty")
    return Task(repo=repo, problem_statement=text, base_commit=commit)


def _absolute_if_local(repo: str) -> str:
    from pathlib import Path

    path = Path(repo).expanduser()
    return str(path.resolve()) if path.is_dir() else repo


def _read_issue_file(path: str) -> str:
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


def _solve_in_tui(repo, issue_text, issue_file, example, commit, config_file, overrides, session, mode,
                  trust, images=()) -> int:
    from pathlib import Path

    from .config import load_config, trust_project, untrusted_settings
    from .models import ModelConfigError
    from .run.solve import continue_with_session_model, load_session, resolve_model
    from .tui import ask_trust, run_tui

    resumed = load_session(load_config(None, None), session, repo) if session else None
    session = resumed.id if resumed else None  # the one found now is the one reopened
    task = None if session else _task_from_flags(repo, issue_text, issue_file, example, commit)
    local = (task.repo if task else repo) if Path(task.repo if task else repo).is_dir() else None
    asked = [] if trust or local is None else untrusted_settings(local, config_file, overrides)
    if asked:
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
    follow_up = (issue_text or (_read_issue_file(issue_file) if issue_file else None)) if session else None
    if images:
        if task is None and follow_up is None:
            raise click.UsageError("--image goes with --issue or --issue-file (in the TUI, paste the image's path "
                                   "into your message)")
        if model is None:
            raise click.UsageError("--image needs a model that accepts images: give --model")
        if task is not None:
            task = task.model_copy(update={"problem_statement": _attach_images(task.problem_statement, images,
                                                                               config, model)})
        else:
            follow_up = _attach_images(follow_up, images, config, model)
    return run_tui(config, model, repo=task.repo if task else repo, commit=commit, task=task, replay=replay,
                   mode=mode, resume=session, follow_up=follow_up)


def _custom_command(config, repo: str, text: str) -> str:
    """`/name args` naming a custom command (run/commands.py): its body, rendered; its allowed-tools
    become the tools this run offers. Any other text is returned as it is."""
    from pathlib import Path

    from .run.commands import custom_commands, find_command
    from .tools.registry import available_tools
    from .tui.commands import COMMANDS

    if not text.lstrip().startswith("/"):
        return text
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


def _solve_headless(repo, issue_text, issue_file, example, commit, config_file, overrides, session, as_json,
                    apply_patch, trust, images=(), json_deltas=False) -> None:
    from pathlib import Path

    from . import patches
    from .config import load_config
    from .events import EventBus
    from .models import ModelConfigError, ModelError
    from .run.apply import WriteThrough
    from .run.apply import apply_patch as apply_to_tree
    from .run.printers import JsonPrinter, ProgressPrinter
    from .run.solve import (
        ModelCheck,
        continue_with_session_model,
        load_session,
        resolve_model,
        samples_candidates,
        start_from_working_tree,
    )
    from .run.solve import solve as run_solve
    from .run.telemetry import subscribe_telemetry
    from .sandbox import snapshot
    from .status import ExitStatus
    from .task import Task
    from .visible import visible

    resumed = load_session(load_config(None, None), session, repo) if session else None
    task = Task.model_validate(resumed.task) if resumed else _task_from_flags(repo, issue_text, issue_file, example, commit)
    follow_up = (issue_text or (_read_issue_file(issue_file) if issue_file else None)) if resumed else None
    config = load_config(task.repo if Path(task.repo).is_dir() else None, config_file, overrides, trust=trust)
    if resumed is not None:
        continue_with_session_model(config, resumed, overrides)
    if follow_up is not None:
        follow_up = _custom_command(config, task.repo, follow_up)
    elif not example:
        task = task.model_copy(update={"problem_statement": _custom_command(config, task.repo, task.problem_statement)})
    model, replay = resolve_model(config, example)
    check = ModelCheck(model)  # the model client's import (seconds) overlaps the rest: the sandbox's start
    if images and follow_up is not None:
        follow_up = _attach_images(follow_up, images, config, model)
    elif images:
        task = task.model_copy(update={"problem_statement": _attach_images(task.problem_statement, images, config,
                                                                           model)})
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
    subscribe_telemetry(events)  # CODEAGENT_ENABLE_TELEMETRY=1 (run/telemetry.py)
    if not as_json:  # the sandbox takes seconds (its image, once: minutes) before the first event
        click.echo(f"codeagent · preparing the {config.sandbox.kind} sandbox…", err=True)
    try:
        outcome = run_solve(task, config, model, events, replay=replay, resume=resumed, follow_up=follow_up,
                            answers=True, check=check)
    except ModelConfigError:
        raise  # exit 3 (_user_errors)
    except ModelError as error:  # the check before any sandbox (a run's own model errors end the run): a
        click.echo(f"error: {visible(str(error))}", err=True)  # server that is not there, one line
        sys.exit(EXIT_MODEL)
    result = outcome.result
    if not as_json:  # exact bytes when piped (`> fix.patch`); on a terminal shown, not obeyed
        if sys.stdout.isatty():
            click.echo(visible(patches.for_display(result.patch)), nl=False)
        else:
            patches.to_stdout(result.patch)
    if result.record_lost:  # the work is kept all the same: the patch below says where
        click.echo(f"warning: the trajectory was not saved whole: {result.record_lost}", err=True)
    moved = f" (not beside its trajectory: {outcome.patch_moved})" if outcome.patch_moved else ""
    if not result.patch.strip():
        if not as_json:
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


def _attach_images(text: str, paths, config, model) -> str:
    """The message with the images' markers (agent/images.py); a model that takes no images, or a
    file that is not an image or too large, is a one-line usage error (exit 2) before anything runs."""
    from .agent.images import ImageError, attach, store_image
    from .models.vision import image_refusal
    from .trajectory.store import TrajectoryStore

    refused = image_refusal(model)
    root = TrajectoryStore(config.trajectory_root()).root
    try:
        if refused:
            raise ImageError(refused)
        return attach(text, [store_image(path, root) for path in paths])
    except (ImageError, OSError) as error:  # one line, before any sandbox is built
        click.echo(f"error: --image: {error}", err=True)
        sys.exit(EXIT_USAGE)


def _mount_groups() -> None:
    from .acp.commands import acp_command
    from .evals.commands import eval_group
    from .train.commands import grade_command, serve, train_group
    from .trajectory.commands import traj
    from .view.commands import view_command

    traj.add_command(grade_command)  # grading needs the harness, a layer above the trajectory package
    cli.add_command(traj)
    cli.add_command(eval_group)
    cli.add_command(train_group)
    cli.add_command(serve)
    cli.add_command(view_command)
    cli.add_command(acp_command)


_mount_groups()


# -- doctor ----------------------------------------------------------------------------------------

@cli.command()
@click.option("--model", "model_name", type=str, help="Check this model instead of the configured one.")
@click.option("--api-base", type=str, help="Its server (an OpenAI-compatible base URL).")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as one JSON object.")
@click.option("--timeout", type=float, default=5.0, show_default=True, help="Seconds to wait for the model's server.")
@click.pass_context
def doctor(ctx, model_name, api_base, as_json, timeout) -> None:
    """Check the set-up: Docker, the base image, the model (key, server), this folder's git state, the
    disk. Each line says ok, warn or fail and what to do; exit 0 when all are ok, else 1."""
    from pathlib import Path

    from .config import ConfigError, flag_overrides, load_config
    from .run import doctor as checks

    given_above = ctx.obj or {}
    folder = Path.cwd()
    try:
        overrides = flag_overrides([], model__name=model_name or given_above.get("model_name"),
                                   model__api_base=api_base or given_above.get("api_base"))
        config = load_config(folder, None, overrides)
    except ConfigError as error:
        raise click.UsageError(str(error)) from None
    found = checks.run_checks(folder, config, timeout=timeout)
    click.echo(checks.as_json(found) if as_json else checks.report(found))
    sys.exit(0 if all(check.status == checks.OK for check in found) else 1)


# -- sandbox ---------------------------------------------------------------------------------------

@cli.group()
def sandbox() -> None:
    """Build the sandbox image, run commands in a sandbox, remove leftovers."""


@sandbox.command("build")
@click.option("--force", is_flag=True, help="Build again even if the image exists.")
@click.option("--prefer", type=click.Choice(["auto", "pull", "bootstrap"]), default="auto", show_default=True,
              help="auto: pull from a registry, else bootstrap from Debian packages (air-gapped).")
@click.option("--suite", type=str, help="Debian suite (bullseye, bookworm, trixie); default: bookworm.")
def sandbox_build(force: bool, prefer: str, suite: str | None) -> None:
    """Make the base image every sandbox starts from."""
    from .sandbox.images import build_base_image

    with _user_errors():
        tag = build_base_image(suite=suite, force=force, prefer=prefer, log=lambda line: click.echo(line, err=True))
    click.echo(tag)


@sandbox.command("run", context_settings={"ignore_unknown_options": True})
@click.option("--repo", type=str, help="Repository: a local path, a local git mirror, or a URL.")
@click.option("--example", type=str, help="A bundled example task instead of --repo (e.g. cart).")
@click.option("--commit", type=str, help="Commit to start from (default: HEAD).")
@click.option("--kind", type=click.Choice(["docker", "local"]), default="docker", show_default=True,
              help="local runs on this machine with NO isolation.")
@click.option("--timeout", type=float, default=600, show_default=True, help="Seconds before the command is killed.")
@click.option("--network", is_flag=True, help="Give the sandbox network access (off by default).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def sandbox_run(repo, example, commit, kind, timeout, network, command) -> None:
    """Start a sandbox on a repository and run COMMAND in it (an example's own tests by default)."""
    from .sandbox import Limits, open_sandbox

    if bool(repo) == bool(example):
        raise click.UsageError("give exactly one of --repo or --example")
    with _user_errors():
        if example:
            from .run.examples import example_repo, example_task

            repo = str(example_repo(example))
            command = command or (example_task(example)["test_command"],)
        if not command:
            raise click.UsageError("give a COMMAND to run (after --)")
        options = {"limits": Limits(network=network)} if kind == "docker" else {}
        if kind == "local":
            click.echo("warning: local sandbox: commands run on this machine with no isolation", err=True)
        with open_sandbox(repo, commit, kind=kind, **options) as box:
            click.echo(f"sandbox ({box.kind}) ready at {box.workdir}; running: {' '.join(command)}", err=True)
            result = box.run(" ".join(command), timeout=timeout)
    from .visible import visible

    output = result.output if not sys.stdout.isatty() else visible(result.output)  # shown on a terminal, not obeyed
    click.echo(output, nl=not output.endswith("\n"))
    if result.timed_out:
        click.echo(f"timed out after {timeout:g}s (process tree killed)", err=True)
        sys.exit(124)
    sys.exit(result.exit_code if result.exit_code is not None else 1)


@sandbox.command("prune")
@click.option("--all", "prune_all", is_flag=True,
              help="Also remove sandboxes whose owner process is alive, or runs on another host.")
@click.option("--images", is_flag=True, help="Also remove cached workspace images.")
def sandbox_prune(prune_all: bool, images: bool) -> None:
    """Remove leftover sandbox containers (and, with --images, workspace images)."""
    from .sandbox.prune import prune

    with _user_errors():
        pruned = prune(include_live=prune_all, images=images)
    click.echo(f"removed {pruned.containers} container(s), {pruned.images} image(s) and {pruned.trees} cached "
               "tree(s)")
    if pruned.other_hosts:
        click.echo(f"note: left {pruned.other_hosts} sandbox(es) of other hosts sharing this Docker engine: their "
                   "owners cannot be checked from here (prune on their host, or --all removes them)", err=True)


# -- plumbing --------------------------------------------------------------------------------------

class _user_errors:
    """Turn the errors a user can act on into one clear line and exit code 3, not a traceback
    (1 and 2 stay free for the commands codeagent runs and for usage errors)."""

    def __init__(self, *extra: type[BaseException]):
        self.extra = extra

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        from .sandbox.errors import SandboxError
        from .visible import visible

        if exc_type is not None and issubclass(exc_type, (SandboxError, FileNotFoundError, *self.extra)):
            click.echo(f"error: {visible(str(exc))}", err=True)
            sys.exit(3)
        return False


def _terminate(signum, frame):  # SIGTERM unwinds like Ctrl-C, so sandboxes are removed
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    try:
        cli(prog_name="codeagent")
    except KeyboardInterrupt:
        forget_handled_interrupt()
        click.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    finally:
        _quick_exit()


def _quick_exit() -> None:
    """The command's work is done (sandboxes closed, files written and closed): the interpreter's last
    garbage collections would walk every object of the imported libraries (litellm: ~1 s here) only to free
    memory the exit frees anyway. The atexit handlers still run (sandboxes left open are removed there)."""
    import gc

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    gc.freeze()


if __name__ == "__main__":
    main()
