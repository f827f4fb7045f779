"""Per-token correction for the sampler on every GRPO path: the loss weighs each token by the ratio of the
trainer's probability to the one the sampler recorded when it sampled the token.

Every rollout records, token by token, the logprobs of the policy that sampled it (the behaviour policy):
the batched transformers engine, TRL's colocated vLLM engine, a `vllm serve` process, an older policy
version in async GRPO. The trainer's own logprobs of the same tokens (the proximal policy: its weights
when the batch is taken, TRL's "old" logprobs) differ from them by the engine's numerics (a bf16 vLLM
against the trainer: ~1e-4 per token), by staleness (async) or not at all. TRL's clipped ratio stays between
the optimized and the proximal policy (decoupled PPO, as AReaL and verl do it); each token is weighted by
the importance ratio proximal / behaviour:

- token_truncate (TIS): weight = min(ratio, cap);
- token_mask (masked IS, two-sided like IcePop): weight = ratio inside [1/cap, cap], else 0, and the token
  leaves the loss's normaliser too (it no longer counts in the tokens a dapo/bnpo/grpo loss divides by);
- none: weight 1 (the mismatch is still measured).

Per token, never per sequence: TRL's default for vLLM (`vllm_importance_sampling_mode: sequence_mask`)
multiplies the ratios of a whole sequence, so over the 12k-20k model tokens of an agent run a uniform
engine bias of ~7e-5 per token gives exp(1.4) = 4 > its clip of 3, and every token of the run leaves the
loss. TRL's own correction is switched off (grpo.py) and this one applies on every path.

The weight multiplies the token's advantage. For every loss TRL computes as a clipped or plain ratio
times the advantage (grpo, bnpo, dr_grpo, dapo, cispo, sapo, luspo) this is exactly the weight applied
to the token's loss (min(r A w, clip(r) A w) = w min(r A, clip(r) A) for w >= 0). The KL term (beta > 0)
is an expectation over the sampled tokens too: it is weighted by the same ratio (kl_weighting.py).

Measured per batch on the tokens the model wrote: mismatch_kl, KL(behaviour || proximal) estimated as
mean(r - 1 - log r) (k3; 0 when the sampler is the trainer), the mean ratio, the largest logprob gap, and
is_masked_fraction, the share of tokens whose ratio is outside the bound (truncated or masked).
"""

from __future__ import annotations

from typing import Any

MODES = ("token_truncate", "token_mask", "none")
# Loss types whose per-token loss is linear in the advantage (see above); vespo is not.
LINEAR_LOSSES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo")
STATISTICS = ("mismatch_kl", "mismatch_logp_abs_max", "is_ratio_mean", "is_masked_fraction")


def behaviour_weights(proximal, behaviour, mask, *, mode: str = "token_truncate", cap: float = 2.0):
    """Per-token weights (B, T), the tokens left out of the loss (B, T; token_mask only) and the batch's
    statistics. `proximal`, `behaviour`: per-token logprobs (B, T) of the trainer now and of the sampler;
    `mask`: 1 on the tokens the model wrote (and the loss counts)."""
    import torch

    if mode not in MODES:
        raise ValueError(f"off-policy correction {mode!r}: one of {', '.join(MODES)}")
    mask = mask.bool()
    log_ratio = torch.nan_to_num((proximal - behaviour).float(), nan=0.0).masked_fill(~mask, 0.0)
    ratio = torch.exp(log_ratio)
    outside = ((ratio > cap) | (ratio < 1.0 / cap)) & mask if mode == "token_mask" else (ratio > cap) & mask
    if mode == "token_truncate":
        weights = ratio.clamp(max=cap)
    elif mode == "token_mask":
        weights = ratio.masked_fill(outside, 0.0)
    else:
        weights = torch.ones_like(ratio)
    weights = weights.masked_fill(~mask, 0.0)
    dropped = outside if mode == "token_mask" else torch.zeros_like(outside)
    tokens = int(mask.sum())
    exact = log_ratio.double()[mask]  # float32 rounding would make k3 of tiny differences negative
    k3 = torch.expm1(exact) - exact
    stats = {
        "tokens": tokens,
        "loss_tokens": tokens - int(dropped.sum()),
        "mismatch_kl": max(0.0, float(k3.mean())) if tokens else 0.0,
        "mismatch_logp_abs_max": float(log_ratio[mask].abs().max()) if tokens else 0.0,
        "is_ratio_mean": float(ratio[mask].mean()) if tokens else 1.0,
        "is_masked_fraction": float(outside.sum()) / tokens if tokens else 0.0,
    }
    return weights.detach(), dropped, stats


def check_correction(loss_type: str, mode: str) -> str | None:
    """Why `mode` cannot correct `loss_type` (None when it can)."""
    if mode != "none" and loss_type not in LINEAR_LOSSES:
        return (f"rollout.off_policy_correction weighs each token's advantage, which is its loss's weight for "
                f"{', '.join(LINEAR_LOSSES)} only; trainer.loss_type={loss_type}: pick one of those or set "
                "rollout.off_policy_correction=none")
    return None


def trainer_class(base: Any = None):
    """`base` (default TRL's GRPOTrainer) with the correction above; built here, as importing TRL takes seconds."""
    import torch
    from trl import GRPOTrainer
    from trl.models.utils import disable_gradient_checkpointing

    from .kl_weighting import weighted_kl_correction

    class BehaviourCorrectedTrainer(base or GRPOTrainer):  # type: ignore[misc]
        off_policy_mode = "token_truncate"
        off_policy_cap = 2.0
        on_batch = None  # called with each training batch's statistics

        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            if not self.model.training or output.get("sampling_per_token_logps") is None:
                return output
            proximal = output.get("old_per_token_logps")
            if proximal is None:  # TRL skips it when the batch is trained on as soon as it is made
                proximal = self._proximal_logps(output)
            tool_mask = output.get("tool_mask")
            mask = output["completion_mask"] if tool_mask is None else output["completion_mask"] * tool_mask
            weights, dropped, stats = behaviour_weights(proximal, output["sampling_per_token_logps"], mask,
                                                        mode=self.off_policy_mode, cap=self.off_policy_cap)
            if self.off_policy_mode != "none":
                advantages = output["advantages"]
                if advantages.dim() == 1:
                    advantages = advantages.unsqueeze(1)
                output["advantages"] = advantages * weights.to(advantages.dtype)
                output["behaviour_weights"] = weights
            if self.off_policy_mode == "token_mask":  # masked tokens leave the normaliser too (every rank gathers)
                keep = (~dropped).to(mask.dtype)
                output["tool_mask"] = keep if tool_mask is None else tool_mask * keep
                output["num_items_in_batch"] = self.accelerator.gather(
                    (output["completion_mask"] * output["tool_mask"]).sum()).sum()
            for name in STATISTICS:
                self._metrics["train"][f"off_policy/{name}"].append(stats[name])
            if self.on_batch is not None:
                self.on_batch(stats)
            return output

        def _compute_loss(self, model, inputs):
            weights = inputs.get("behaviour_weights")
            if not self.beta or weights is None:
                return super()._compute_loss(model, inputs)
            captured: list = []
            original = self._get_per_token_logps_and_entropies

            def capture(*args, **kwargs):
                result = original(*args, **kwargs)
                captured.append(result[0])
                return result

            setattr(self, "_get_per_token_logps_and_entropies", capture)  # noqa: B010 (mypy: a method replaced)
            try:
                loss = super()._compute_loss(model, inputs)
            finally:
                delattr(self, "_get_per_token_logps_and_entropies")
            return loss + weighted_kl_correction(self, captured[-1], inputs, weights)

        def _proximal_logps(self, output: dict[str, Any]):
            ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
            attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
            with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
                logps, _, _ = self._get_per_token_logps_and_entropies(
                    self.model, ids, attention, output["completion_ids"].size(1),
                    batch_size=self.args.per_device_train_batch_size)
            return logps

    return BehaviourCorrectedTrainer
