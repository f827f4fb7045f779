"""The work of `codeagent train sft|dpo|grpo|merge` and `codeagent traj grade` (their click definitions:
cli/train_commands.py, cli/traj_commands.py). Heavy imports (torch, TRL) inside the functions."""

from __future__ import annotations

import sys

import click

EXIT_USER_ERROR = 3  # as the rest of the CLI: a problem the user can fix, said in one line
TRAINERS = {"sft": "codeagent.train.sft", "dpo": "codeagent.train.dpo", "grpo": "codeagent.train.grpo.trainer"}


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_USER_ERROR)


def train_method(method: str, config: str, overrides: tuple[str, ...]) -> None:
    """Train with a recipe of `method`; a problem the user can fix exits 3 in one line, Ctrl-C 130."""
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


def dry_run_plan(method: str, config: str, overrides: tuple[str, ...]) -> None:
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


def grpo_memory_plan(config: str, overrides: tuple[str, ...], *, device_memory: float, prompt_tokens: int,
                     devices: int, sharded: bool, accelerate_config: str | None) -> None:
    """`train grpo --dry-run`: the memory per device and whether the recipe fits; exit 3 with the reason if not."""
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


def merge(adapter: str, output_dir: str) -> None:
    """Fold a trained adapter into its base model, saved to `output_dir`."""
    from . import TrainError
    from .modeling import merge_adapter

    try:
        click.echo(merge_adapter(adapter, output_dir))
    except TrainError as error:
        _fail(str(error))


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
