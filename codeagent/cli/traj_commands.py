"""`codeagent traj ...`: list, show, export and grade stored trajectories (the store, its exports: trajectory/;
the grading: train/commands.py's `grade_runs`).

Only click is imported at module level so that `codeagent --help` stays instant.
"""

from __future__ import annotations

import json

import click


def _filter_options(command):
    options = [
        click.option("--instance", help="Instance id (shell wildcards allowed, e.g. 'django__*')."),
        click.option("--model", "model_name", help="Substring of the model name."),
        click.option("--exit-status", help="Exact exit status, e.g. submitted."),
        click.option(
            "--resolved/--unresolved", default=None, help="Only (un)resolved trajectories."
        ),
        click.option("--group", "group_id", help="Group id (candidates of one task)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _make_filter(instance, model_name, exit_status, resolved, group_id):
    from ..trajectory.store import TrajectoryFilter

    return TrajectoryFilter(
        instance=instance, model=model_name, exit_status=exit_status, resolved=resolved,
        group_id=group_id,
    )


def _store(ctx: click.Context):
    from ..trajectory.store import TrajectoryStore

    return TrajectoryStore(ctx.obj["store_dir"])


def _task_label(trajectory) -> str:
    task = trajectory.task
    if task.get("instance_id"):
        return task["instance_id"]
    text = (task.get("problem_statement") or task.get("repo") or "").strip().splitlines()
    return (text[0][:40] if text else "") or "-"


def _reward_label(trajectory) -> str:
    if not trajectory.rewards:
        return "-"
    parts = [
        f"{key}={value:.3g}" if isinstance(value, (int, float)) else f"{key}={value}"
        for key, value in trajectory.rewards.items()
    ]
    return parts[0].split("=", 1)[1] if len(parts) == 1 else ", ".join(parts)[:30]


@click.group("traj")
@click.option(
    "--store", "store_dir", type=click.Path(file_okay=False), envvar="CODEAGENT_TRAJECTORY_DIR",
    help="Trajectory directory [default: ~/.codeagent/trajectories].",
)
@click.pass_context
def traj(ctx: click.Context, store_dir: str | None) -> None:
    """List, show and export recorded trajectories."""
    ctx.ensure_object(dict)
    ctx.obj["store_dir"] = store_dir


def _console():
    """Rich on a terminal; piped (`traj ls | cat`), lines as long as their content, not cut to 80 columns."""
    import sys

    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=100_000, no_color=True, highlight=False)


def _resolve(store, ref: str) -> str:
    """A trajectory id from the id, a unique prefix, or a unique suffix (the short id the TUI shows)."""
    from ..trajectory.store import TrajectoryError

    try:
        return store.resolve(ref)
    except TrajectoryError:
        ends = [trajectory_id for trajectory_id in store.ids() if ref and trajectory_id.endswith(ref)]
        if len(ends) == 1:
            return ends[0]
        raise


def _as_json(t) -> dict:
    totals = t.totals
    return {"id": t.id, "created": t.created.isoformat(), "task": _task_label(t), "repo": t.task.get("repo"),
            "model": t.model, "exit_status": t.exit_status, "steps": totals.steps,
            "prompt_tokens": totals.prompt_tokens, "completion_tokens": totals.completion_tokens,
            "cost": totals.cost, "resolved": t.resolved, "rewards": t.rewards or {}, "group_id": t.group_id}


@traj.command("ls")
@_filter_options
@click.option("--limit", "-n", default=50, show_default=True, help="Most recent N (0: all).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per trajectory, one per line.")
@click.pass_context
def ls_command(ctx, instance, model_name, exit_status, resolved, group_id, limit, as_json) -> None:
    """List trajectories, most recent last."""
    from rich.table import Table
    from rich.text import Text

    from ..visible import visible

    store = _store(ctx)
    trajectories = store.list(_make_filter(instance, model_name, exit_status, resolved, group_id))
    if limit:
        trajectories = trajectories[-limit:]
    if as_json:
        for t in trajectories:
            click.echo(json.dumps(_as_json(t), default=str))
        return
    console = _console()
    if not trajectories:
        console.print(f"No trajectories in {store.root}.")
        return
    table = Table(box=None, header_style="bold")
    for column in ("id", "created", "task", "model", "exit", "steps", "cost", "reward"):
        table.add_column(
            column, justify="right" if column in ("steps", "cost") else "left",
            no_wrap=column in ("id", "created"),
        )
    for t in trajectories:
        cost = t.totals.cost
        table.add_row(*(Text(visible(cell)) for cell in (
            t.id,
            t.created.astimezone().strftime("%Y-%m-%d %H:%M"),
            _task_label(t),
            t.model,
            t.exit_status or "-",
            str(t.totals.steps),
            "-" if cost is None else f"${cost:.4f}",
            _reward_label(t),
        )))
    console.print(table)


@traj.command("show")
@click.argument("trajectory_id")
@click.option("--max-chars", default=2000, show_default=True,
              help="Cut each message to this many characters (0: no limit).")
@click.pass_context
def show_command(ctx, trajectory_id: str, max_chars: int) -> None:
    """Show one trajectory's conversation (ID may be a unique prefix or suffix)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.syntax import Syntax

    from .. import patches
    from ..text import head_tail
    from ..trajectory.store import TrajectoryError
    from ..visible import visible

    store = _store(ctx)
    try:
        t = store.load(_resolve(store, trajectory_id))
    except TrajectoryError as error:
        raise click.ClickException(str(error)) from None
    console = Console()
    def cut(text: str) -> str:  # to print: what the model and the tools wrote is shown, never obeyed
        return escape(visible(head_tail(text, max_chars) if max_chars else text))

    totals = t.totals
    console.print(f"[bold]{escape(visible(t.id))}[/]  task: {cut(_task_label(t))}  model: {cut(t.model)}")
    console.print(
        f"exit: {cut(t.exit_status or '-')}  steps: {totals.steps}  "
        f"tokens: {totals.prompt_tokens}+{totals.completion_tokens}  "
        f"cost: {'-' if totals.cost is None else f'${totals.cost:.4f}'}  "
        f"resolved: {t.resolved if t.resolved is not None else '-'}  reward: {cut(_reward_label(t))}"
    )
    if t.exit_message:
        console.print(f"[red]{cut(t.exit_message)}[/]")
    colors = {"system": "magenta", "user": "green", "assistant": "cyan", "tool": "yellow"}
    for message in t.messages:
        role = message.get("role", "?")
        console.rule(f"[{colors.get(role, 'white')}]{cut(str(role))}[/]", align="left")
        content = message.get("content")
        if content:
            console.print(cut(content if isinstance(content, str) else json.dumps(content)))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            console.print(
                f"[bold cyan]→ {cut(str(function.get('name')))}[/] {cut(str(function.get('arguments')))}"
            )
    if t.patch:
        console.rule("[bold]patch[/]", align="left")
        console.print(Syntax(visible(patches.for_display(t.patch)), "diff", word_wrap=True))


@traj.command("export")
@click.option("--format", "fmt", type=click.Choice(["sft", "dpo", "jsonl"]), required=True)
@click.option("--output", "-o", type=click.Path(), required=True,
              help="sft/dpo: .jsonl, .parquet, or a directory (datasets.save_to_disk).")
@_filter_options
@click.option("--include-unresolved", is_flag=True,
              help="sft: also export trajectories not verified as resolved.")
@click.option("--max-pairs", type=int, default=None, help="dpo: at most N pairs per task.")
@click.option("--pairs", type=click.Choice(["task", "siblings"]), default="task", show_default=True,
              help="dpo: pair any two runs of a task, or only runs that started from the same state (a search's "
                   "branches from one node, an evolution round's runs, the samples of a group).")
@click.option("--prefer", type=click.Choice(["resolved", "value"]), default="resolved", show_default=True,
              help="dpo: chosen by the grade, or by the verifiers' value test-time scaling recorded (ungraded runs).")
@click.option("--allow-flagged", is_flag=True,
              help="sft/dpo: also take runs the grader flagged (test infrastructure touched, masked failures, "
                   "a tampered test run) as positive examples; by default they are left out.")
@click.pass_context
def export_command(ctx, fmt, output, instance, model_name, exit_status, resolved, group_id,
                   include_unresolved, max_pairs, allow_flagged, pairs, prefer) -> None:
    """Export trajectories as raw JSONL, or SFT / DPO datasets."""
    from ..trajectory import export

    store = _store(ctx)
    trajectories = store.list(_make_filter(instance, model_name, exit_status, resolved, group_id))
    flagged = 0 if allow_flagged or fmt == "jsonl" else sum(bool(t.resolved and t.integrity_flags) for t in trajectories)
    try:
        if fmt == "jsonl":
            count = export.to_jsonl(trajectories, output)
        elif fmt == "sft":
            count = export.to_sft(trajectories, output, require_resolved=not include_unresolved,
                                  allow_flagged=allow_flagged)
        else:
            count = export.to_dpo(trajectories, output, max_pairs_per_task=max_pairs, allow_flagged=allow_flagged,
                                  siblings=pairs == "siblings", prefer=prefer)
    except export.ExportError as error:
        raise click.ClickException(str(error)) from None
    except OSError as error:
        where = error.filename or output
        raise click.ClickException(f"cannot write {where}: {error.strerror or error}") from None
    if count == 0:
        why = {
            "sft": "sft takes trajectories verified as resolved (verification.resolved = true) and not flagged "
            "by the grader; grade them first, or pass --include-unresolved / --allow-flagged",
            "dpo": "dpo needs, for the same task (--pairs siblings: the same starting state), a resolved and an "
            "unresolved trajectory (--prefer value: two different recorded values)",
            "jsonl": "no trajectory matched the filters",
        }[fmt]
        raise click.ClickException(f"nothing exported from {store.root}: {why}"
                                   + (f" ({flagged} resolved run(s) flagged by the grader)" if flagged else ""))
    if flagged:
        click.echo(f"left out as positives: {flagged} resolved run(s) the grader flagged (--allow-flagged takes them)",
                   err=True)
    click.echo(f"exported {count} {'rows' if fmt != 'jsonl' else 'trajectories'} to {output}")


class _TaskFormats(click.Choice):
    """auto and the formats of codeagent.data's registry, read when first asked for (not by `codeagent --help`)."""

    def __init__(self):
        super().__init__(())

    @property
    def choices(self):
        from ..data import FORMATS

        return ("auto", *FORMATS)

    @choices.setter
    def choices(self, value):
        pass


@traj.command("grade")
@click.argument("ids", nargs=-1, metavar="[ID]...")
@click.option("--tasks", default=None, metavar="FILE",
              help="Tasks with their tests (SWE-bench, SWE-Gym, SWE-smith or R2E-Gym file), matched by instance id; "
                   "default: the task each run recorded, when it carries its tests.")
@click.option("--format", "tasks_format", default="auto", show_default=True, type=_TaskFormats())
@click.option("--instance", default=None, help="Only runs of these instances (shell wildcards).")
@click.option("--force", is_flag=True, help="Grade runs that already have a verdict again.")
@click.option("--similarity", default=0.0, show_default=True, type=float,
              help="Weight of the SWE-RL patch-similarity reward (needs the gold patch).")
@click.option("--steps", default=0.0, show_default=True, type=float, help="Weight of the G-RA gated step reward.")
@click.option("--logs", default=None, metavar="DIR", help="Where test logs go (default: STORE/.grading).")
@click.pass_context
def grade_command(ctx: click.Context, **options) -> None:
    """Grade stored runs against their task's tests (the harness) and store verdicts and rewards."""
    from ..train.commands import grade_runs  # the grading (harness, rewards) is the trainer's

    grade_runs((ctx.obj or {}).get("store_dir"), **options)
