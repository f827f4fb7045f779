"""DPO on pairs from the same task (TRL DPOTrainer + LoRA): resolved chosen, unresolved rejected.

The rows are pre-tokenized (data.dpo_rows) with a mask over each continuation, so the preference is
computed on the assistant's tokens only; tool outputs inside a multi-turn continuation do not count.
"""

from __future__ import annotations

from pathlib import Path

from .data import dpo_rows, to_dataset
from .modeling import load_base, peft_config_for, run_trainer, trl_args
from .recipe import Recipe

MASK_COLUMNS = ("chosen_mask", "rejected_mask")


def _classes():
    """TRL's DPO trainer and collator, extended to take rows that are already tokenized and masked."""
    import torch
    from trl import DPOTrainer
    from trl.trainer.dpo_trainer import DataCollatorForPreference

    class MaskedPreferenceCollator(DataCollatorForPreference):
        def torch_call(self, examples):
            output = super().torch_call(examples)
            width = output["completion_mask"].shape[1]
            rows = []
            for side in ("chosen", "rejected"):
                for example in examples:
                    mask = [0] * len(example["prompt_ids"]) + list(example[f"{side}_mask"])
                    if self.max_length is not None:
                        mask = mask[: self.max_length] if self.truncation_mode == "keep_start" \
                            else mask[-self.max_length:]
                    rows.append(mask + [0] * (width - len(mask)))
            output["completion_mask"] = output["completion_mask"] * torch.tensor(rows, dtype=torch.long)
            return output

    class MaskedDPOTrainer(DPOTrainer):
        def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
            if all(column in dataset.column_names for column in ("prompt_ids", *MASK_COLUMNS)):
                return dataset  # tokenized and masked by codeagent.train.data
            return super()._prepare_dataset(dataset, processing_class, args, dataset_name)

        def _set_signature_columns_if_needed(self):
            super()._set_signature_columns_if_needed()
            self._signature_columns = list(dict.fromkeys([*self._signature_columns, *MASK_COLUMNS]))  # type: ignore[has-type]

    return MaskedDPOTrainer, MaskedPreferenceCollator


def build_trainer(recipe: Recipe, *, callbacks=(), store=None):
    trainer_class, collator_class = _classes()
    args = trl_args(recipe)  # first: under DeepSpeed ZeRO-3 it makes the model load sharded (modeling.load_base)
    model, tokenizer = load_base(recipe, args)
    rows, summary = dpo_rows(recipe.data, tokenizer, max_length=args.max_length, store=store)
    collator = collator_class(pad_token_id=tokenizer.pad_token_id, max_length=args.max_length,
                              truncation_mode=args.truncation_mode, pad_to_multiple_of=args.pad_to_multiple_of)
    trainer = trainer_class(model=model, args=args, train_dataset=to_dataset(rows), processing_class=tokenizer,
                            data_collator=collator, peft_config=peft_config_for(model, recipe),
                            callbacks=list(callbacks))
    return trainer, tokenizer, summary


def run(recipe: Recipe, *, callbacks=(), store=None) -> Path:
    """Train and save the adapter; returns its directory."""
    return run_trainer(build_trainer, recipe, callbacks=callbacks, store=store)
