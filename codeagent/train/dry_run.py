"""`train sft|dpo --dry-run`: what a recipe would train, without loading a model or training.

It reads the recipe, looks for the base model, counts what the data filters keep from the store
(before tokenization: the length and token-exactness filters are applied when training starts), and
says where the adapter would go. No model, tokenizer or dataset library is loaded. A problem that
would stop the run (the base model missing, nothing to train on) is returned, and the command exits
non-zero with it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from . import TrainError
from .data import _nothing_left, select
from .recipe import Recipe

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # owner/name on the Hugging Face hub
TRAINER_KEYS = ("max_steps", "num_train_epochs", "learning_rate", "per_device_train_batch_size",
                "gradient_accumulation_steps", "max_length", "beta")


def missing_model(recipe: Recipe) -> str | None:
    """Why the recipe's base model is not there (and how to make it), or None."""
    base = recipe.model.base
    if Path(base).expanduser().is_dir():
        return None
    if recipe.model.build:
        return f"the base model {base} is missing: run `{recipe.model.build.format(base=base)}` first"
    if HUB_ID.match(base) and not base.startswith(("runs/", "./", "../")):
        return None  # fetched from the hub when training starts (or found in its cache)
    return f"the base model {base} is missing: no directory there, and it is not a hub id (owner/name)"


def plan(recipe: Recipe, store=None) -> tuple[list[str], list[str]]:
    """(what would be trained, line by line; the problems that would stop it)."""
    lines, problems = [], []
    source = f" ({recipe.source})" if recipe.source else ""
    lines.append(f"recipe: {recipe.method}{source}" + (f": {recipe.description}" if recipe.description else ""))
    base = recipe.model.base
    missing = missing_model(recipe)
    where = "missing" if missing else ("local directory" if Path(base).expanduser().is_dir()
                                       else "hub id: fetched when training starts unless cached")
    lines.append(f"model: {base} ({where})" + (f", continuing adapter {recipe.model.adapter}"
                                               if recipe.model.adapter else ""))
    if missing:
        problems.append(missing)
    targets = recipe.lora.target_modules
    lines.append(f"LoRA: r {recipe.lora.r}, alpha {recipe.lora.alpha}, on "
                 f"{targets if isinstance(targets, str) else ', '.join(targets)}")
    try:
        lines.append("data: " + (_sft_data(recipe, store) if recipe.method == "sft" else _dpo_data(recipe, store)))
    except TrainError as error:
        lines.append("data: nothing to train on")
        problems.append(str(error))
    chosen = {key: recipe.trainer[key] for key in TRAINER_KEYS if key in recipe.trainer}
    lines.append("trainer: " + (", ".join(f"{key} {value}" for key, value in chosen.items()) or "TRL's defaults"))
    output = Path(recipe.output_dir)
    checkpoints = sorted(output.glob("checkpoint-*")) if output.is_dir() else []
    resumes = f"; resumes from {checkpoints[-1].name}" if checkpoints and recipe.resume not in (False, "false") else ""
    lines.append(f"output: {output}/adapter{resumes}")
    lines.append(f"memory: not estimated for {recipe.method} (the estimator models GRPO: train grpo --dry-run)")
    return lines, problems


def _sft_data(recipe: Recipe, store) -> str:
    selection = select(recipe.data, require_resolved=None, store=store)
    if not selection.trajectories:
        hint = ("SFT takes trajectories verified as resolved: grade them first, or set data.resolved=null"
                if recipe.data.resolved else "Loosen the data filters")
        raise _nothing_left(selection, "trajectories", hint)
    return f"{selection.summary()}; up to {len(selection.trajectories)} training rows"


def _dpo_data(recipe: Recipe, store) -> str:
    selection = select(recipe.data.model_copy(update={"resolved": None}), require_resolved=None, store=store)
    by_task: dict[str, list] = defaultdict(list)
    for trajectory in selection.trajectories:
        if trajectory.resolved is not None:
            by_task[trajectory.task_key].append(trajectory)
    cap = recipe.data.max_pairs_per_task
    pairs, paired = 0, 0
    for group in by_task.values():
        wins = sum(1 for t in group if t.resolved)
        count = wins * (len(group) - wins)
        pairs += min(count, cap) if cap else count
        paired += bool(count)
    if not pairs:
        if selection.total == 0:
            raise _nothing_left(selection, "trajectories", "")
        raise TrainError(f"no preference pairs: DPO needs, for the same task, a resolved and an unresolved "
                         f"trajectory; {selection.summary()}, {len(by_task)} task(s) graded")
    return (f"{selection.summary()}; {paired} of {len(by_task)} graded task(s) have a resolved and an unresolved "
            f"run: up to {pairs} preference pair(s)")
