"""`codeagent train sft|dpo|grpo|merge|tiny|toy-demos` (click). The work is train/commands.py's (recipes,
trainers, dry runs), imported inside each command: torch and TRL load only when a command runs."""

from __future__ import annotations

import click

_recipe = click.option("--config", "-c", "config", required=True, metavar="RECIPE",
                       help="A recipe file (train/*.yaml) or the name of a bundled one, e.g. sft-tiny.")
_overrides = click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")
_dry_run = click.option("--dry-run", is_flag=True, help="Print what would be trained (recipe, model, data counts, "
                        "output) and exit; load and train nothing.")


@click.group("train")
def train_group() -> None:
    """Fine-tune the model behind codeagent on its trajectories (TRL + PEFT LoRA).

    Each method reads a recipe (train/*.yaml); KEY=VALUE arguments override it, e.g.
    `trainer.learning_rate=1e-4 lora.r=8 data.resolved=null`. Runs resume from their last checkpoint.
    """


def _train_or_plan(method: str, config: str, dry_run: bool, overrides: tuple[str, ...]) -> None:
    from ..train.commands import dry_run_plan, train_method

    if dry_run:
        dry_run_plan(method, config, overrides)
    else:
        train_method(method, config, overrides)


@train_group.command("sft")
@_recipe
@_dry_run
@_overrides
def sft_command(config: str, dry_run: bool, overrides: tuple[str, ...]) -> None:
    """Supervised fine-tuning on resolved trajectories (assistant tokens only)."""
    _train_or_plan("sft", config, dry_run, overrides)


@train_group.command("dpo")
@_recipe
@_dry_run
@_overrides
def dpo_command(config: str, dry_run: bool, overrides: tuple[str, ...]) -> None:
    """DPO on resolved vs unresolved trajectories of the same task."""
    _train_or_plan("dpo", config, dry_run, overrides)


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
    from ..train.commands import grpo_memory_plan, train_method

    if not dry_run:
        train_method("grpo", config, overrides)
        return
    grpo_memory_plan(config, overrides, device_memory=device_memory, prompt_tokens=prompt_tokens, devices=devices,
                     sharded=sharded, accelerate_config=accelerate_config)


@train_group.command("merge")
@click.argument("adapter")
@click.argument("output_dir")
def merge_command(adapter: str, output_dir: str) -> None:
    """Fold a trained adapter into its base model and save the result to OUTPUT_DIR."""
    from ..train.commands import merge

    merge(adapter, output_dir)


@train_group.command("tiny")
@click.argument("output_dir")
@click.option("--vocab", default=1024, show_default=True, help="Tokenizer vocabulary size.")
@click.option("--toy-store", default=None, help="Also train the tokenizer on the trajectories in this store.")
def tiny_command(output_dir: str, vocab: int, toy_store: str | None) -> None:
    """Build a tiny random model and tokenizer offline (for the tiny recipes and tests)."""
    from ..train.toy import build_toy_model

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
    from ..train.toy import record_demonstrations

    ids = record_demonstrations(store_dir, tasks=toy_tasks(count))
    click.echo(f"{len(ids)} demonstrations in {store_dir}")
