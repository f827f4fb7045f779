"""The `codeagent` command: the group, the exit codes, the plumbing every command shares. Heavy modules are
imported inside commands: `--help` stays instant. The commands: solve_command.py (and headless.py, issue.py),
setup_commands.py (doctor, sandbox), tasks.py, traj_commands.py, eval_commands.py, train_commands.py,
serve_command.py, view_command.py, acp_command.py; their work is done in the packages they import."""

from __future__ import annotations

import os
import signal
import sys

from .. import interrupts

if sys.argv[:1] == ["-m"] or os.path.basename(sys.argv[0] if sys.argv else "") == "codeagent":
    interrupts.install()  # the command line: a Ctrl-C while it is imported waits for main() (interrupts.py)

import click  # noqa: E402

from .. import __version__  # noqa: E402
from ..git_args import forget_repository_env  # noqa: E402
from ..interrupts import forget_handled_interrupt  # noqa: E402

# The exit codes of `codeagent solve` (documented in docs/solve.md): 0 a patch was submitted (and
# applied, with --apply), or in plan mode the agent answered; 1 the run ended without one, or --apply refused; 2 a usage error; 3 the
# configuration or the environment (no model or key, Docker, a bad setting); 4 a limit was reached;
# 5 the model failed (unreachable, rejected the request); 6 the agent submitted an empty patch (it changed
# nothing: CI tells that from a fix); 130 interrupted (Ctrl-C).
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_LIMIT, EXIT_MODEL, EXIT_EMPTY = 0, 1, 2, 3, 4, 5, 6
EXIT_INTERRUPTED = 130


def exit_code(status: str) -> int:
    """The process's exit code for a run's exit status."""
    from ..status import LIMITS, ExitStatus

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
            click.echo("interrupted", err=True)
            _remove_own_sandboxes()
            ctx.exit(EXIT_INTERRUPTED)


def _remove_own_sandboxes() -> None:
    """Containers of this process that no `with` closed: one whose creation Ctrl-C cut (the engine made
    it, the answer never came)."""
    if "codeagent.sandbox.docker" not in sys.modules:
        return  # no Docker sandbox was started
    from ..sandbox.docker import close_all
    from ..sandbox.prune import remove_own

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
            from .solve_command import solve

            ctx.invoke(solve, **options)
        else:
            click.echo(ctx.get_help())
        return
    misplaced = [name for name in given if name not in ("model_name", "api_base")]
    if misplaced or (given and ctx.invoked_subcommand not in ("solve", "doctor")):
        flags = ", ".join(_flag_of(name) for name in (misplaced or given))
        raise click.UsageError(f"{flags}: solve's options go after `codeagent solve`, or with `codeagent` alone "
                               f"(not before `{ctx.invoked_subcommand}`)")


def _flag_of(name: str) -> str:
    return next(param.opts[0] for param in cli.params if param.name == name)


# -- plumbing --------------------------------------------------------------------------------------

class _user_errors:
    """Turn the errors a user can act on into one clear line and exit code 3, not a traceback
    (1 and 2 stay free for the commands codeagent runs and for usage errors)."""

    def __init__(self, *extra: type[BaseException]):
        self.extra = extra

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        from ..sandbox.errors import SandboxError
        from ..visible import visible

        if exc_type is not None and issubclass(exc_type, (SandboxError, FileNotFoundError, *self.extra)):
            click.echo(f"error: {visible(str(exc))}", err=True)
            sys.exit(3)
        return False


def _terminate(signum, frame):  # SIGTERM unwinds like Ctrl-C, so sandboxes are removed
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    forget_repository_env(os.environ)  # run from a git hook or `git bisect run`: GIT_DIR names another repository
    try:
        interrupts.ready()  # a Ctrl-C never lands inside an import; one held until now is raised here
        cli(prog_name="codeagent")
        code = 0
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        code = EXIT_INTERRUPTED
    except SystemExit as done:
        code = done.code
    _leave(code)


def _leave(code) -> None:
    """Exit with `code` (as sys.exit takes it) once the command's work is done (sandboxes closed, files
    written and closed). The interpreter's last garbage collections would walk every object of the imported
    libraries (litellm: ~1 s here) only to free memory the exit frees anyway: they are skipped (gc.freeze),
    the atexit handlers still run. A model check still importing its client (a Ctrl-C or an error during the
    start) must not see the interpreter torn down under it (a crash): then the exit's steps are taken here
    (threads joined, atexit handlers, streams flushed) and the process ends without the teardown."""
    import gc

    forget_handled_interrupt()  # any Ctrl-C was handled by now (here, by the CLI or by a run that ended `interrupted`)
    _flush()
    if not _model_check_running():
        gc.freeze()
        sys.exit(code)
    import atexit
    import os
    import threading

    if code is not None and not isinstance(code, int):
        click.echo(str(code), err=True)
        code = 1
    shutdown = getattr(threading, "_shutdown", None)  # what the interpreter's exit does first: join threads
    if callable(shutdown):
        shutdown()
    atexit._run_exitfuncs()
    _flush()
    os._exit((code or 0) & 0xFF)


def _model_check_running() -> bool:
    if "codeagent.run.model_check" not in sys.modules:
        return False
    from ..run.model_check import model_check_running

    return model_check_running()


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def _mount_groups() -> None:
    from .acp_command import acp_command
    from .eval_commands import eval_group
    from .serve_command import serve
    from .train_commands import train_group
    from .traj_commands import traj
    from .view_command import view_command

    cli.add_command(traj)
    cli.add_command(eval_group)
    cli.add_command(train_group)
    cli.add_command(serve)
    cli.add_command(view_command)
    cli.add_command(acp_command)


from . import setup_commands, solve_command, tasks  # noqa: E402,F401 - they add their commands to `cli`

_mount_groups()
