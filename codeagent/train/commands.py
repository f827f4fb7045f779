"""`codeagent train sft|dpo|grpo|merge|tiny` and `codeagent traj grade` (click; heavy imports inside commands)."""

from __future__ import annotations

import sys

import click

EXIT_USER_ERROR = 3  # as the rest of the CLI: a problem the user can fix, said in one line
TRAINERS = {"sft": "codeagent.train.sft", "dpo": "codeagent.train.dpo", "grpo": "codeagent.train.grpo.trainer"}


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_USER_ERROR)


def _run(method: str, config: str, overrides: tuple[str, ...]) -> None:
    import importlib
    import logging

    from ..interrupts import forget_handled_interrupt
    from ..models.errors import ModelConfigError
    from . import TrainError
    from .recipe import load_recipe

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    recipe = None
    try:
        recipe = load_recipe(config, overrides, method=method)
        module = importlib.import_module(TRAINERS[method])
        click.echo(f"{method}: base {recipe.model.base}, output {recipe.output_dir}", err=True)
        adapter = module.run(recipe)
    except (TrainError, ModelConfigError) as error:
        _fail(str(error))
        return
    except KeyboardInterrupt:
        forget_handled_interrupt()
        where = f" in {recipe.output_dir}" if recipe is not None else ""
        click.echo(f"interrupted; run the same command again to resume from the last checkpoint{where}", err=True)
        sys.exit(130)
    click.echo(f"adapter saved to {adapter} (card: {adapter}/README.md)")
    click.echo(f"try it: codeagent serve --model {adapter}", err=True)


_recipe = click.option("--config", "-c", "config", required=True, metavar="RECIPE",
                       help="A recipe file (train/*.yaml) or the name of a bundled one, e.g. sft-tiny.")
_overrides = click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")


@click.group("train")
def train_group() -> None:
    """Fine-tune the model behind codeagent on its trajectories (TRL + PEFT LoRA).

    Each method reads a recipe (train/*.yaml); KEY=VALUE arguments override it, e.g.
    `trainer.learning_rate=1e-4 lora.r=8 data.resolved=null`. Runs resume from their last checkpoint.
    """


_dry_run = click.option("--dry-run", is_flag=True, help="Print what would be trained (recipe, model, data counts, "
                        "output) and exit; load and train nothing.")


def _dry_run_plan(method: str, config: str, overrides: tuple[str, ...]) -> None:
    """Exit 0 when the run could start, 3 with the reasons when it could not."""
    from . import TrainError
    from .dry_run import plan
    from .recipe import load_recipe

    try:
        lines, problems = plan(load_recipe(config, overrides, method=method))
    except TrainError as error:
        _fail(str(error))
        return
    click.echo("\n".join(lines))
    for problem in problems:
        click.echo(f"error: {problem}", err=True)
    if problems:
        sys.exit(EXIT_USER_ERROR)
    click.echo("dry run: nothing trained; drop --dry-run to train", err=True)


@train_group.command("sft")
@_recipe
@_dry_run
@_overrides
def sft_command(config: str, dry_run: bool, overrides: tuple[str, ...]) -> None:
    """Supervised fine-tuning on resolved trajectories (assistant tokens only)."""
    if dry_run:
        _dry_run_plan("sft", config, overrides)
    else:
        _run("sft", config, overrides)


@train_group.command("dpo")
@_recipe
@_dry_run
@_overrides
def dpo_command(config: str, dry_run: bool, overrides: tuple[str, ...]) -> None:
    """DPO on resolved vs unresolved trajectories of the same task."""
    if dry_run:
        _dry_run_plan("dpo", config, overrides)
    else:
        _run("dpo", config, overrides)


@train_group.command("grpo")
@_recipe
@click.option("--dry-run", is_flag=True,
              help="Print the estimated memory per device and whether the recipe fits; load and run nothing.")
@click.option("--device-memory", default=80.0, show_default=True, type=click.FloatRange(min=1),
              help="--dry-run: GiB of memory per device.")
@click.option("--prompt-tokens", default=4096, show_default=True, type=click.IntRange(min=1),
              help="--dry-run: tokens of the first prompt (system prompt, tools and the issue).")
@click.option("--devices", default=1, show_default=True, type=click.IntRange(min=1),
              help="--dry-run: devices the weights are sharded over (with --sharded).")
@click.option("--sharded", is_flag=True, help="--dry-run: weights sharded over --devices (ZeRO-3 / FSDP).")
@click.option("--accelerate-config", default=None, type=click.Path(dir_okay=False),
              help="--dry-run: the accelerate config to estimate for (default: the recipe's "
                   "distributed.accelerate_config, else one device).")
@_overrides
def grpo_command(config: str, dry_run: bool, device_memory: float, prompt_tokens: int, devices: int,
                 sharded: bool, accelerate_config: str | None, overrides: tuple[str, ...]) -> None:
    """Online GRPO: rollouts are agent runs in sandboxes, rewarded by the harness."""
    if not dry_run:
        _run("grpo", config, overrides)
        return
    from . import TrainError
    from .dry_run import missing_model
    from .grpo import runnable
    from .grpo.memory import check_fits, estimate, layout_from_accelerate, report
    from .recipe import load_recipe

    try:
        recipe = load_recipe(config, overrides, method="grpo")
        if (missing := missing_model(recipe)) and recipe.model.build:  # nothing to estimate from: say how to make it
            raise TrainError(missing)
        layout = layout_from_accelerate(accelerate_config) if accelerate_config else None
        values = estimate(recipe, device_gib=device_memory,
                          prompt_tokens=prompt_tokens, devices=devices, sharded=sharded, layout=layout)
        click.echo(report(values))
        # what the run itself would refuse on this layout, before memory (runnable.py)
        refused = runnable.problems(recipe, processes=int(values["devices"]), strategy=str(values["strategy"]))
        if refused:
            raise TrainError(f"cannot run on {values['layout']}: " + "; ".join(refused))
        check_fits(values)
    except TrainError as error:
        _fail(str(error))
    click.echo("fits", err=True)


@train_group.command("merge")
@click.argument("adapter")
@click.argument("output_dir")
def merge_command(adapter: str, output_dir: str) -> None:
    """Fold a trained adapter into its base model and save the result to OUTPUT_DIR."""
    from . import TrainError
    from .modeling import merge_adapter

    try:
        click.echo(merge_adapter(adapter, output_dir))
    except TrainError as error:
        _fail(str(error))


@train_group.command("tiny")
@click.argument("output_dir")
@click.option("--vocab", default=1024, show_default=True, help="Tokenizer vocabulary size.")
@click.option("--toy-store", default=None, help="Also train the tokenizer on the trajectories in this store.")
def tiny_command(output_dir: str, vocab: int, toy_store: str | None) -> None:
    """Build a tiny random model and tokenizer offline (for the tiny recipes and tests)."""
    from .toy import build_toy_model

    click.echo(build_toy_model(output_dir, toy_store, vocab_size=vocab))


@train_group.command("toy-demos")
@click.argument("store_dir")
@click.option("--tasks", "count", default=None, type=click.IntRange(min=1),
              help="How many of the toy family's tasks (evals/toy/family.yaml) to demonstrate  [default: all: a "
                   "policy SFT-ed on fewer does not open the other tasks' turns with a tool call]")
def toy_demos_command(store_dir: str, count: int | None) -> None:
    """Record scripted runs of every candidate edit of the toy tasks, graded by their hidden tests, into
    STORE_DIR (one in four is right): what sft-tiny-toy trains the tiny model on (needs Docker)."""
    from ..data.toy import toy_tasks
    from .toy import record_demonstrations

    ids = record_demonstrations(store_dir, tasks=toy_tasks(count))
    click.echo(f"{len(ids)} demonstrations in {store_dir}")


def grade_runs(store_dir: str | None, ids: tuple[str, ...], tasks: str | None, tasks_format: str,
               instance: str | None, force: bool, similarity: float, steps: float, logs: str | None) -> None:
    """Grade stored runs against their task's tests (the harness) and store verdicts and rewards."""
    import fnmatch
    from pathlib import Path

    from ..trajectory.store import TrajectoryError, TrajectoryStore
    from . import TrainError
    from .grade import grade_trajectories, load_tasks
    from .recipe import RewardsSection

    store = TrajectoryStore(store_dir)
    try:
        known = load_tasks(tasks, tasks_format)
        chosen = [store.load(i) for i in ids] if ids else list(store.iter())
    except (TrainError, TrajectoryError) as error:
        _fail(str(error))
        return
    if instance:
        chosen = [t for t in chosen if fnmatch.fnmatchcase(t.instance_id or "", instance)]
    if not chosen:
        _fail(f"no runs to grade in {store.root}")
    weights = RewardsSection(similarity=similarity, steps=steps)
    results = grade_trajectories(store, chosen, tasks=known, weights=weights, force=force,
                                 output_dir=Path(logs) if logs else store.root / ".grading")
    for line in results:
        what = line.get("skipped") or f"{line['outcome']}, reward {line['reward']}"
        click.echo(f"{line['id']}  {line.get('instance_id') or '-'}  {what}")
    graded = sum(1 for line in results if "skipped" not in line)
    click.echo(f"graded {graded} of {len(results)} run(s)", err=True)
    if not graded:
        sys.exit(EXIT_USER_ERROR)


def main() -> None:
    """`python -m codeagent.train.commands train ...` before the group is mounted in cli/__init__.py."""
    import signal

    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # unwind: sandboxes removed
    root = click.Group(commands={"train": train_group})
    root(prog_name="codeagent")


if __name__ == "__main__":
    main()
