"""The `codeagent` command. Heavy modules are imported inside commands: `--help` stays instant."""

from __future__ import annotations

import signal
import sys

import click

from . import __version__

NOT_BUILT = {
    "solve": "the agent (issue #3: models, tools, headless solve) and the TUI (issue #7)",
    "eval": "the SWE-bench harness and batch evaluation (issue #4)",
    "train": "SFT, DPO and GRPO training on trajectories (issue #6)",
    "traj": "the trajectory store commands (issue #3)",
    "serve": "serving a trained model over an OpenAI-compatible API (issue #6)",
}


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="codeagent")
def cli() -> None:
    """codeagent: resolves issues in your repository from a Docker sandbox, and learns from it."""


def _not_built(name: str, what: str) -> click.Command:
    @click.command(name, context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
                   help=f"(not built yet) {what}.", add_help_option=False)
    @click.pass_context
    def command(ctx: click.Context) -> None:
        click.echo(f"`codeagent {name}` is not built yet: it will bring {what}.", err=True)
        ctx.exit(2)

    return command


for _name, _what in NOT_BUILT.items():
    cli.add_command(_not_built(_name, _what))


# -- sandbox ---------------------------------------------------------------------------------------

@cli.group()
def sandbox() -> None:
    """Build the sandbox image, run commands in a sandbox, remove leftovers."""


@sandbox.command("build")
@click.option("--force", is_flag=True, help="Build again even if the image exists.")
@click.option("--prefer", type=click.Choice(["auto", "pull", "bootstrap"]), default="auto", show_default=True,
              help="auto: pull from a registry, else bootstrap from Debian packages (air-gapped).")
def sandbox_build(force: bool, prefer: str) -> None:
    """Make the base image every sandbox starts from."""
    from .sandbox.images import build_base_image

    with _user_errors():
        tag = build_base_image(force=force, prefer=prefer, log=lambda line: click.echo(line, err=True))
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
            from .examples import example_repo, example_task

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
    click.echo(result.output, nl=not result.output.endswith("\n"))
    if result.timed_out:
        click.echo(f"timed out after {timeout:g}s (process tree killed)", err=True)
        sys.exit(124)
    sys.exit(result.exit_code if result.exit_code is not None else 1)


@sandbox.command("prune")
@click.option("--all", "prune_all", is_flag=True, help="Also remove sandboxes whose owner process is alive.")
@click.option("--images", is_flag=True, help="Also remove cached workspace images.")
def sandbox_prune(prune_all: bool, images: bool) -> None:
    """Remove leftover sandbox containers (and, with --images, workspace images)."""
    from .sandbox.prune import prune

    with _user_errors():
        containers, removed_images = prune(include_live=prune_all, images=images)
    click.echo(f"removed {containers} container(s) and {removed_images} image(s)")


# -- plumbing --------------------------------------------------------------------------------------

class _user_errors:
    """Turn the errors a user can act on into one clear line and exit code 3, not a traceback
    (1 and 2 stay free for the commands codeagent runs and for usage errors)."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        from .sandbox.errors import SandboxError

        if exc_type is not None and issubclass(exc_type, (SandboxError, FileNotFoundError)):
            click.echo(f"error: {exc}", err=True)
            sys.exit(3)
        return False


def _terminate(signum, frame):  # SIGTERM unwinds like Ctrl-C, so sandboxes are removed
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    try:
        cli(prog_name="codeagent")
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
