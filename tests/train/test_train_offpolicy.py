"""The per-token correction for the sampler on every GRPO path (train/grpo/offpolicy.py, kl_weighting.py): a long
agent run whose sampler is off by a small uniform bias keeps every token (TRL's per-sequence default for vLLM
masked it whole); masked tokens leave the loss's normaliser; the KL term is weighted like the policy term.
Real TRL steps on a tiny model built offline, CPU, no Docker."""

from __future__ import annotations

import math
import os
from pathlib import Path
from types import SimpleNamespace

import pytest


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    import torch

    from codeagent.train.tiny import build_tiny

    torch.set_num_threads(1)
    return build_tiny(tmp_path_factory.mktemp("tiny-model"), vocab_size=512)


def test_a_long_trajectory_with_a_small_uniform_bias_keeps_its_tokens():
    """20,000 model tokens sampled by an engine 7e-5 nats per token off the trainer (bf16 vLLM against the
    trainer): per token, every ratio is ~1 and every token stays in the loss, whatever the mode; one ratio
    for the sequence (TRL's sequence_mask) would be exp(1.4) = 4.1, past its clip of 3: the whole run out."""
    import torch

    from codeagent.train.grpo.offpolicy import MODES, behaviour_weights

    proximal = -torch.rand(1, 20_000) * 3
    behaviour = proximal - 7e-5
    mask = torch.ones(1, 20_000, dtype=torch.long)
    for mode in MODES:
        weights, dropped, stats = behaviour_weights(proximal, behaviour, mask, mode=mode, cap=2.0)
        assert stats["loss_tokens"] == stats["tokens"] == 20_000 and not dropped.any(), mode
        assert stats["is_masked_fraction"] == 0.0 and (weights - 1).abs().max() < 1e-3, mode
        assert stats["mismatch_kl"] == pytest.approx(7e-5 ** 2 / 2, rel=0.05)
    assert math.exp(float((proximal - behaviour).sum())) > 3.0  # what one sequence ratio would have been


class Seen:
    """Keeps what a trainer's step hands its loss (`seen`)."""

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)  # type: ignore[misc]
        self.seen = output
        return output


def _trainer(tiny, tmp_path, overrides, rollout, reward, *, settings=None, cls=None):
    """A real GRPO trainer of codeagent's class (offpolicy.trainer_class, or `cls`) over scripted rollouts."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from codeagent.train.grpo.offpolicy import trainer_class
    from codeagent.train.modeling import lora_config, trl_args
    from codeagent.train.recipe import load_recipe

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    run = load_recipe("grpo-tiny", [f"model.base={tiny}", f"output_dir={tmp_path}", "trainer.num_generations=2",
                                    "trainer.per_device_train_batch_size=2", "trainer.save_steps=100", *overrides])
    args = trl_args(run, **(settings or {"temperature": 1.0}))
    trainer = (cls or trainer_class())(model=AutoModelForCausalLM.from_pretrained(tiny), reward_funcs=[reward], args=args,
                                  processing_class=AutoTokenizer.from_pretrained(tiny), rollout_func=rollout,
                                  train_dataset=Dataset.from_list([{"prompt": "fix"}] * 8),
                                  peft_config=lora_config(run))
    trainer.off_policy_mode, trainer.off_policy_cap = run.rollout.off_policy_correction, run.rollout.off_policy_cap
    return trainer


def _logprobs(model, prompt: list[int], completion: list[int]) -> list[float]:
    import torch

    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + completion])).logits[0, len(prompt) - 1:-1].float()
    return torch.log_softmax(logits, -1)[torch.arange(len(completion)), torch.tensor(completion)].tolist()


def _reward(prompts, completions, good, **_):
    return [1.0 if flag else 0.0 for flag in good]


def test_the_sync_vllm_path_corrects_per_token_and_trains_every_token_of_a_long_run(tiny, tmp_path):
    """The synchronous vLLM route (grpo.trl_settings with use_vllm): TRL's own correction is off and the
    per-token one applies. A GRPO step on two runs of 1,500 model tokens whose recorded logprobs are the
    trainer's minus 1e-3 per token: every token is trained (none masked, the adapter moves). The same batch
    under TRL's default (sequence_mask, clip 3) gets importance ratio 0 on every token: exp(1.5) > 3."""
    import torch
    from transformers import AutoModelForCausalLM

    from codeagent.train.grpo import trainer as grpo
    from codeagent.train.recipe import load_recipe

    settings = grpo.trl_settings(load_recipe("grpo-tiny", [f"model.base={tiny}", "rollout.generation=vllm"]),
                                 use_vllm=True, reward_weights=[1.0])
    assert settings["use_vllm"] is True and settings["vllm_importance_sampling_correction"] is False
    model = AutoModelForCausalLM.from_pretrained(tiny)
    generator = torch.Generator().manual_seed(0)
    prompt = [5, 6, 7, 8]
    runs = [torch.randint(10, 500, (1500,), generator=generator).tolist() for _ in range(2)]
    recorded = [[value - 1e-3 for value in _logprobs(model, prompt, run)] for run in runs]  # the LoRA starts as a no-op

    def rollout(prompts, trainer):
        return {"prompt_ids": [prompt] * len(prompts), "completion_ids": [runs[i % 2] for i in range(len(prompts))],
                "logprobs": [recorded[i % 2] for i in range(len(prompts))], "good": [i % 2 == 0 for i in range(len(prompts))]}

    def on_vllm_route(trainer):  # what use_vllm changes in TRL's step with a rollout function: a weight sync
        trainer.use_vllm, trainer.vllm_generation = True, SimpleNamespace(sync_weights=lambda: None)
        trainer._last_loaded_step = -1
        return trainer

    ours = on_vllm_route(_trainer(tiny, tmp_path / "ours", ["trainer.max_steps=1"], rollout, _reward,
                                  settings={**settings, "use_vllm": False}))
    stats: list[dict] = []
    ours.on_batch = stats.append
    before = {n: p.detach().clone() for n, p in ours.model.named_parameters() if p.requires_grad}
    ours.train()
    [batch] = stats
    assert batch["tokens"] == batch["loss_tokens"] == 3000 and batch["is_masked_fraction"] == 0.0
    assert batch["mismatch_logp_abs_max"] < 2e-3 and batch["mismatch_kl"] < 1e-5
    assert any(not torch.equal(p, before[n]) for n, p in ours.model.named_parameters() if p.requires_grad)

    from trl import GRPOTrainer

    # TRL's own class and default correction, for the contrast
    trls = on_vllm_route(_trainer(tiny, tmp_path / "trl", ["trainer.max_steps=1"], rollout, _reward,
                                  settings={"temperature": 1.0}, cls=type("T", (Seen, GRPOTrainer), {})))
    assert trls.vllm_importance_sampling_mode == "sequence_mask" and trls.vllm_importance_sampling_correction
    trls.train()
    assert float(trls.seen["importance_sampling_ratio"].max()) == 0.0  # both runs out of the loss


def test_token_mask_leaves_masked_tokens_out_of_the_normaliser(tiny, tmp_path):
    """token_mask: a run whose recorded logprobs are far off the trainer's is masked token by token, and its
    tokens no longer count in the number of tokens the dapo loss divides by (num_items_in_batch); the exact
    run's tokens do."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny)
    prompt, exact, far = [5, 6, 7], [20, 21, 22, 23, 24], [30, 31, 32]

    def rollout(prompts, trainer):
        return {"prompt_ids": [prompt] * len(prompts), "completion_ids": [exact, far] * (len(prompts) // 2),
                "logprobs": [_logprobs(model, prompt, exact), [0.0] * len(far)] * (len(prompts) // 2),
                "good": [True, False] * (len(prompts) // 2)}

    from codeagent.train.grpo.offpolicy import trainer_class

    trainer = _trainer(tiny, tmp_path, ["trainer.max_steps=1", "rollout.off_policy_correction=token_mask"], rollout,
                       _reward, cls=type("T", (Seen, trainer_class()), {}))
    trainer.train()
    output = trainer.seen
    assert int(output["num_items_in_batch"]) == len(exact)
    kept = (output["completion_mask"] * output["tool_mask"]).sum(-1).tolist()
    assert kept == [len(exact), 0]


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo"])
def test_the_kl_term_takes_the_same_weight_as_the_policy_term(tiny, tmp_path, loss_type):
    """With every token weighted c (and advantages 0, so only the KL term is left), the loss is TRL's own
    with beta times c: the KL term's weighting is reduced exactly as each loss type reduces its loss."""
    import torch

    def rollout(prompts, trainer):
        raise AssertionError("not called")

    def loss(trainer, weights):
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1
        completion = torch.tensor([[20, 21, 22, 23], [30, 31, 0, 0]])
        mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
        inputs = {"prompt_ids": torch.tensor([[5, 6, 7], [5, 6, 7]]), "prompt_mask": torch.ones(2, 3, dtype=torch.long),
                  "completion_ids": completion, "completion_mask": mask, "advantages": torch.zeros(2),
                  "num_items_in_batch": mask.sum(), "ref_per_token_logps": -torch.arange(8.0).view(2, 4) / 4 - 5}
        if weights is not None:
            inputs["behaviour_weights"] = torch.full((2, 4), weights)
        with torch.no_grad():
            return float(trainer._compute_loss(trainer.model, inputs))

    options = [f"trainer.loss_type={loss_type}", "trainer.beta=0.1"] + (
        ["trainer.epsilon_high=5.0"] if loss_type == "cispo" else [])
    weighted = _trainer(tiny, tmp_path / "w", options, rollout, _reward)
    doubled = _trainer(tiny, tmp_path / "d", [options[0], "trainer.beta=0.25", *options[2:]], rollout, _reward)
    assert loss(weighted, 1.0) == pytest.approx(loss(weighted, None), rel=1e-6)
    assert loss(weighted, 2.5) == pytest.approx(loss(doubled, None), rel=1e-5)
    assert abs(loss(weighted, 0.0)) < 1e-7


def test_every_path_refuses_a_correction_its_loss_cannot_take(tiny):
    from codeagent.train import TrainError
    from codeagent.train.grpo import trainer as grpo
    from codeagent.train.recipe import load_recipe

    for recipe_name in ("grpo-tiny", "grpo-tiny-async"):
        run = load_recipe(recipe_name, [f"model.base={tiny}", "trainer.loss_type=vespo"])
        with pytest.raises(TrainError, match="loss_type=vespo"):
            grpo.build_trainer(run, tasks=[])
    run = load_recipe("grpo-tiny", [f"model.base={tiny}", "trainer.vllm_importance_sampling_mode=token_mask"])
    with pytest.raises(TrainError, match="rollout.off_policy_correction"):
        grpo.build_trainer(run, tasks=[])
