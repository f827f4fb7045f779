"""Held-out evaluation during GRPO, for real: a GRPO step on the toy family's training side, then the
current policy rolled out on a task it never trains on, in Docker, graded, logged as pass@k."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from codeagent.train.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("tiny"), vocab_size=512)


def test_grpo_evaluates_pass_at_k_on_held_out_tasks(tiny, tmp_path, no_leaks):
    """Through `grpo.run`, the synchronous path: metrics.jsonl has the held-out record and, as every GRPO run's
    does, the per-token correction's record of the batch (mismatch_kl, is_masked_fraction: test_train_offpolicy.py)."""
    import torch

    from codeagent.train.grpo import trainer as grpo
    from codeagent.train.recipe import load_recipe
    from codeagent.trajectory.store import TrajectoryStore

    torch.set_num_threads(1)
    store, out = tmp_path / "rollouts", tmp_path / "out"
    recipe = load_recipe("grpo-tiny", [f"model.base={tiny}", f"output_dir={out}", "data.tasks=toy:2",
                                       "data.held_out=1", "data.held_out_by=task", f"rollout.store={store}",
                                       "rollout.eval_every=1", "rollout.eval_samples=2", "trainer.max_steps=1",
                                       "trainer.num_generations=2", "trainer.per_device_train_batch_size=2",
                                       "rollout.max_tokens=16", "rollout.set={limits.max_steps: 2}",
                                       # a random model's runs hit limits: kept in the loss, to be measured
                                       "rollout.mask_truncated=false", "rollout.mask_exit_statuses=[]"])
    grpo.run(recipe)
    summary = json.loads((out / "training_data.json").read_text())
    [held_out] = summary["held_out_tasks"]
    assert held_out not in summary["tasks"] and len(summary["tasks"]) == 1
    [evaluation] = summary["held_out_evals"]
    assert evaluation["step"] == 1 and evaluation["tasks"] == 1 and evaluation["samples"] == 2
    assert 0.0 <= evaluation["pass@1"] <= evaluation["pass@2"] <= 1.0 and evaluation["processes"] == 1
    runs = [t for t in TrajectoryStore(store).iter() if (t.group_id or "").startswith("eval-")]
    assert len(runs) == 2 and {t.instance_id for t in runs} == {held_out}
    assert all(t.verification.get("resolved") is not None for t in runs)  # graded like training rollouts
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    [written] = [r for r in records if r.get("event") == "held_out_eval"]
    assert written["pass@2"] == evaluation["pass@2"]
    [correction] = [r for r in records if r.get("event") == "off_policy"]
    assert correction["tokens"] == correction["loss_tokens"] > 0 and correction["correction"] == "token_truncate"
    assert correction["mismatch_kl"] < 1e-4 and correction["is_masked_fraction"] == 0.0  # the sampler is the trainer
    assert any("off_policy/mismatch_kl" in r for r in records)  # TRL's step log carries it too
