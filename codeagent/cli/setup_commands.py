"""`codeagent doctor` and `codeagent sandbox` (build, run, prune)."""

from __future__ import annotations

import sys

import click

from . import _user_errors, cli

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

    from ..config import ConfigError, flag_overrides, load_config
    from ..run import doctor as checks

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
    from ..sandbox.images import build_base_image

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
    """Start a sandbox on a repository and run COMMAND in it (default: the repository's own tests, their
    results parsed and counted; an example's own tests)."""
    from ..sandbox import Limits, open_sandbox

    if bool(repo) == bool(example):
        raise click.UsageError("give exactly one of --repo or --example")
    report = None
    with _user_errors():
        if example:
            from ..run.examples import example_repo, example_task

            repo = str(example_repo(example))
            command = command or (example_task(example)["test_command"],)
        options: dict[str, object] = {"limits": Limits(network=network)} if kind == "docker" else {}
        if not example:
            from ..sandbox import snapshot

            repo = snap = snapshot(repo, commit)
            if not command:
                from ..run.repo_env import repository_tests

                report = repository_tests(snap)
                if report is None:
                    raise click.UsageError("no test command found for this repository: give a COMMAND to run (after --)")
                command = (report.command,)
                click.echo(f"the repository's tests: {report.command} (read as {report.log_parser})", err=True)
        if not command:
            raise click.UsageError("give a COMMAND to run (after --)")
        if kind == "docker" and not example:  # the repository's toolchain (or sandbox.image), said in one line
            from ..config import load_config
            from ..run.repo_env import repository_environment

            options["image"] = repository_environment(snap, load_config(None, None),
                                                      lambda line: click.echo(line, err=True)).image
        if kind == "local":
            click.echo("warning: local sandbox: commands run on this machine with no isolation", err=True)
        with open_sandbox(repo, commit, kind=kind, **options) as box:
            click.echo(f"sandbox ({box.kind}) ready at {box.workdir}; running: {' '.join(command)}", err=True)
            result = box.run(" ".join(command), timeout=timeout)
    from ..visible import visible

    output = result.output if not sys.stdout.isatty() else visible(result.output)  # shown on a terminal, not obeyed
    click.echo(output, nl=not output.endswith("\n"))
    if report is not None:
        from ..run.repo_env import counted

        click.echo(counted(report, result.output), err=True)
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
    from ..sandbox.prune import prune

    with _user_errors():
        pruned = prune(include_live=prune_all, images=images)
    click.echo(f"removed {pruned.containers} container(s), {pruned.images} image(s) and {pruned.trees} cached "
               "tree(s)")
    if pruned.other_hosts:
        click.echo(f"note: left {pruned.other_hosts} sandbox(es) of other hosts sharing this Docker engine: their "
                   "owners cannot be checked from here (prune on their host, or --all removes them)", err=True)
