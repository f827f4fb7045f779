"""Supervised fine-tuning on resolved trajectories (TRL SFTTrainer + LoRA), assistant tokens only."""

from __future__ import annotations

from pathlib import Path

from .data import sft_rows, to_dataset
from .modeling import load_base, peft_config_for, run_trainer, trl_args
from .recipe import Recipe


def build_trainer(recipe: Recipe, *, callbacks=(), store=None):
    from trl import SFTTrainer

    args = trl_args(recipe)  # first: under DeepSpeed ZeRO-3 it makes the model load sharded (modeling.load_base)
    model, tokenizer = load_base(recipe, args)
    rows, summary = sft_rows(recipe.data, tokenizer, max_length=args.max_length, store=store)
    dataset = to_dataset(rows)
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                         peft_config=peft_config_for(model, recipe), callbacks=list(callbacks))
    return trainer, tokenizer, summary


def run(recipe: Recipe, *, callbacks=(), store=None) -> Path:
    """Train and save the adapter; returns its directory."""
    return run_trainer(build_trainer, recipe, callbacks=callbacks, store=store)
