"""Online GRPO (TRL GRPOTrainer + LoRA) with rollouts that are real agent runs (rollouts.py).

Loss options go to TRL as they are (`trainer.loss_type: dapo | dr_grpo | grpo`, `epsilon`,
`epsilon_high` for clip-higher, `beta` = 0 i.e. no KL by default, `scale_rewards`, ...). The sampling
temperature is `rollout.temperature`, used both to generate and in the loss.

Objective options TRL does not have (objectives.py): `rewards.baseline: leave_one_out` and DAPO dynamic
sampling that refills the batch (`rollout.dynamic_sampling`). GSPO and CISPO are TRL's
(`trainer.importance_sampling_level: sequence`, `trainer.loss_type: cispo`).

On every path (transformers or vLLM generation, sync or async) the loss corrects each token for the
sampler with the logprobs it recorded (`rollout.off_policy_correction`, offpolicy.py; TRL's own vLLM
correction, per sequence by default, is switched off) and every batch's mismatch goes to metrics.jsonl
(`off_policy` records).

`rollout.asynchronous: true`: rollout workers keep sampling from versioned copies of the policy while the
trainer steps, and stale groups are dropped (async_rollouts.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from ...nested import deep_merge, nest
from .. import TrainError
from ..data import rl_tasks, save_summary, to_dataset
from ..modeling import (
    MetricsFile,
    load_base,
    peft_config_for,
    save_adapter,
    train,
    trl_args,
)
from ..recipe import Recipe
from . import runnable
from .offpolicy import check_correction

# Recipe keys that own these TRL settings.
OWNED = {"temperature": "rollout.temperature", "top_p": "rollout.top_p", "reward_weights": "rewards.*",
         "use_vllm": "rollout.generation",
         # the per-token correction of every path replaces TRL's (offpolicy.py)
         **{f"vllm_importance_sampling_{key}": "rollout.off_policy_correction / rollout.off_policy_cap"
            for key in ("correction", "mode", "clip_max", "clip_min", "cap")}}


def agent_config(recipe: Recipe):
    """The codeagent Config the rollouts run with: rollout.agent_config (a file, or `toy`) + rollout.set,
    with the sampling settings of the recipe."""
    from ...config import Config

    settings = recipe.rollout
    overrides = nest(settings.set)
    if settings.agent_config == "toy":
        from ..toy import toy_config

        data = toy_config().model_dump(mode="json")
    elif settings.agent_config:
        path = Path(settings.agent_config).expanduser()
        if not path.is_file():
            raise TrainError(f"rollout.agent_config: no config file at {path}")
        data = yaml.safe_load(path.read_text()) or {}
        prompts = (data.get("agent") or {}).get("prompts_dir")
        if prompts and not Path(prompts).is_absolute() and not Path(prompts).is_dir():
            data["agent"]["prompts_dir"] = str(path.parent / prompts)
    else:
        data = {}
    data = deep_merge(data, overrides)
    model = data.setdefault("model", {})
    model.update(temperature=settings.temperature, max_tokens=settings.max_tokens, top_p=settings.top_p)
    try:
        return Config.model_validate(data)
    except Exception as error:
        raise TrainError(f"rollout agent config: {error}") from None


def _check_owned(recipe: Recipe) -> None:
    for key, owner in OWNED.items():
        if key in recipe.trainer:
            raise TrainError(f"trainer.{key} is set by the recipe's {owner}; set it there")


def _use_vllm(recipe: Recipe) -> bool:
    choice = recipe.rollout.generation
    if recipe.rollout.asynchronous:
        if choice == "vllm":
            raise TrainError("rollout.asynchronous samples from versioned copies of the policy; TRL's colocated vLLM "
                             "holds one copy, updated in place at every step, so a run would mix two policies "
                             "unseen. Use rollout.generation=transformers, or rollout.served=true (vllm serve, "
                             "an adapter per version)")
        return False
    if choice == "transformers":
        return False
    from .vllm_cpu import vllm_usable

    available = vllm_usable()
    if choice == "vllm" and not available:
        raise TrainError("rollout.generation=vllm needs a GPU and the vllm package: pip install 'codeagent[vllm]' "
                         "(a vllm that accepts this project's transformers; a bare `pip install vllm` takes one that "
                         "downgrades it); or use rollout.generation=transformers")
    return available


def build_trainer(recipe: Recipe, *, callbacks=(), store=None, tasks: list | None = None):
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental
    from trl import GRPOTrainer

    from ...trajectory.store import TrajectoryStore
    from . import rewards
    from .rollouts import Rollouts

    _check_owned(recipe)
    try:
        components = rewards.active(recipe.rewards)
    except ValueError as error:
        raise TrainError(str(error)) from None
    tasks = tasks if tasks is not None else rl_tasks(recipe.data)
    config = agent_config(recipe)
    use_vllm = _use_vllm(recipe)
    problem = runnable.top_p_convention(recipe.rollout.top_p, "vllm serve" if recipe.rollout.served
                                        else "vllm" if use_vllm else "transformers")
    if problem:
        raise TrainError(problem)
    args = trl_args(recipe, **trl_settings(recipe, use_vllm=use_vllm, reward_weights=[weight for _, weight in components]))
    model, tokenizer = load_base(recipe, args)  # after the config: sharded at load under ZeRO-3
    rollout_store = store or TrajectoryStore(recipe.rollout.store or recipe.data.store)
    rollouts = Rollouts(recipe, tasks, tokenizer, config, rollout_store)
    dataset = to_dataset([{"prompt": task.instance_id} for task in tasks])
    evaluation: Any = None  # a HeldOutEvaluation when the recipe asks for one
    callbacks = list(callbacks)
    if recipe.rollout.eval_every:
        if not recipe.data.held_out:
            raise TrainError("rollout.eval_every evaluates on held-out tasks: set data.held_out too")
        from .heldout import HeldOutEvaluation

        held = rl_tasks(recipe.data, side="held_out")
        rollouts.tasks.update({task.instance_id: task for task in held})
        evaluation = HeldOutEvaluation(rollouts, held, every=recipe.rollout.eval_every,
                                       samples=recipe.rollout.eval_samples,
                                       write=lambda record: rollouts.on_eval(record) if rollouts.on_eval else None)
        callbacks.append(evaluation.callback)
    from .offpolicy import trainer_class as corrected

    problem = check_correction(recipe.trainer.get("loss_type", "dapo"), recipe.rollout.off_policy_correction)
    if problem:
        raise TrainError(problem)
    trainer_class, rollout_func, publish = corrected(GRPOTrainer), rollouts, None  # type: Any, Any, Any
    if recipe.rollout.asynchronous:
        rollout_func, publish = _asynchronous(recipe, rollouts, tasks)
        callbacks.append(publish)
    trainer_class, rollout_func = _objectives(recipe, trainer_class, rollout_func, tasks)
    trainer = trainer_class(
        model=model, reward_funcs=[rewards.reward_function(name) for name, _ in components], args=args,
        train_dataset=dataset, processing_class=tokenizer, peft_config=peft_config_for(model, recipe),
        rollout_func=rollout_func, callbacks=callbacks,
    )
    trainer.off_policy_mode, trainer.off_policy_cap = recipe.rollout.off_policy_correction, recipe.rollout.off_policy_cap
    processes = trainer.accelerator.num_processes
    if publish is not None:
        if problem := runnable.one_process("asynchronous", processes):
            raise TrainError(problem)
        publish.trainer = trainer
        trainer.on_batch = rollout_func.on_loss_statistics
    if recipe.rollout.dynamic_sampling and (problem := runnable.one_process("dynamic_sampling", processes)):
        raise TrainError(problem)
    if evaluation is not None:
        evaluation.trainer = trainer
    rollouts.evaluation = evaluation
    summary = {"tasks": [task.instance_id for task in tasks], "task_source": recipe.data.tasks,
               "rollout_store": str(rollout_store.root), "rewards": dict(components)}
    if evaluation is not None:
        summary["held_out_tasks"] = [task.instance_id for task in evaluation.tasks]
    return trainer, tokenizer, rollouts, summary


def trl_settings(recipe: Recipe, *, use_vllm: bool, reward_weights: list[float]) -> dict[str, Any]:
    """The TRL settings a GRPO run sets itself, from the recipe's own keys (OWNED)."""
    fixed: dict[str, Any] = {"temperature": recipe.rollout.temperature, "reward_weights": reward_weights}
    if recipe.rollout.top_p is not None:
        fixed["top_p"] = recipe.rollout.top_p
    if "disable_dropout" not in recipe.trainer:  # rollouts sample without dropout: train without it too
        fixed["disable_dropout"] = True
    if use_vllm:
        # TRL's vLLM correction defaults to one ratio per sequence (sequence_mask): over an agent run's thousands
        # of tokens a tiny per-token engine bias masks the whole run. The per-token one of offpolicy.py applies.
        fixed.update(use_vllm=True, vllm_importance_sampling_correction=False)
    return fixed


def _objectives(recipe: Recipe, trainer_class, rollout_func, tasks: list):
    """The objective options TRL does not have (objectives.py): leave-one-out baseline, dynamic sampling."""
    from .objectives import DynamicSampling, leave_one_out_class

    if recipe.rewards.baseline == "leave_one_out":
        trainer_class = leave_one_out_class(trainer_class)
    if recipe.rollout.dynamic_sampling:
        if recipe.rollout.asynchronous:
            raise TrainError("rollout.dynamic_sampling refills a step's batch as it is made; async rollouts are "
                             "made ahead by the workers: set rollout.dynamic_sampling=0 (or drop_uniform_groups)")
        rollout_func = DynamicSampling(rollout_func, tasks, rounds=recipe.rollout.dynamic_sampling,
                                       group_size=int(recipe.trainer.get("num_generations", 8)), seed=recipe.seed)
    return trainer_class, rollout_func


def _asynchronous(recipe: Recipe, rollouts, tasks: list):
    """Async GRPO's pieces (async_rollouts.py): the rollout function fed by the workers, and the callback that
    publishes each step's weights."""
    from .async_rollouts import AsyncRollouts, publish_callback

    producer = AsyncRollouts(rollouts, tasks, seed=recipe.seed)
    return producer, publish_callback(producer)


def run(recipe: Recipe, *, callbacks=(), store=None, tasks: list | None = None) -> Path:
    out = Path(recipe.output_dir)
    metrics = MetricsFile(out / "metrics.jsonl")
    trainer, tokenizer, rollouts, summary = build_trainer(recipe, callbacks=[metrics.callback, *callbacks],
                                                          store=store, tasks=tasks)
    rollouts.on_summary = lambda entry: metrics.write(
        {"event": "rollouts", **{k: v for k, v in entry.items() if k != "trajectory_ids"}})
    rollouts.on_eval = metrics.write
    producer = getattr(trainer, "rollout_func", None) if recipe.rollout.asynchronous else None
    if producer is None:  # async: the batch's async_step record carries the same statistics
        trainer.on_batch = lambda stats: metrics.write({"event": "off_policy", "step": trainer.state.global_step,
                                                        "correction": recipe.rollout.off_policy_correction, **stats})
    if producer is not None or recipe.rollout.dynamic_sampling:
        trainer.rollout_func.on_record = lambda record: metrics.write(
            {k: v for k, v in record.items() if k != "trajectory_ids"})
    try:
        final = train(trainer, recipe, metrics)
    finally:
        if producer is not None:
            producer.close()
    if producer is not None:
        summary["async"] = {"max_staleness": recipe.rollout.max_staleness, "published_versions": producer.versions.published,
                            "dropped_stale_groups": producer.buffer.dropped_total}
    if rollouts.evaluation is not None:
        summary["held_out_evals"] = rollouts.evaluation.history
    summary["rollouts"] = [{k: v for k, v in h.items() if k != "trajectory_ids"} for h in rollouts.history]
    summary["rollout_ids"] = [i for h in rollouts.history for i in h["trajectory_ids"] if i]
    save_summary(summary, out / "training_data.json")
    return save_adapter(trainer, tokenizer, recipe, summary, final)
