"""The loss of async GRPO: samples from an older policy, corrected with the logprobs recorded at sampling.

Three policies meet in an async step (decoupled PPO, as AReaL and verl do it): the behaviour policy that
sampled the tokens (an older version, its logprobs recorded token by token in the trajectory), the
proximal policy (the trainer's weights when the batch is taken, TRL's "old" logprobs) and the policy
being optimized. TRL's clipped ratio stays between the optimized and the proximal policy; each token is
weighted by the importance ratio proximal / behaviour, which a stale or numerically different sampler
pulls away from 1:

- token_truncate (TIS): weight = min(ratio, cap);
- token_mask (masked IS, two-sided like IcePop): weight = ratio inside [1/cap, cap], else 0 (the token
  leaves the loss);
- none: weight 1 (the mismatch is still measured).

The weight multiplies the token's advantage. For every loss TRL computes as a clipped or plain ratio
times the advantage (grpo, bnpo, dr_grpo, dapo, cispo, sapo, luspo) this is exactly the weight applied
to the token's loss (min(r A w, clip(r) A w) = w min(r A, clip(r) A) for w >= 0), which is where TRL's
own correction puts it; TRL applies its correction only to samples from its vLLM engine, hence this.

Measured per batch on the tokens the model wrote: mismatch_kl, KL(behaviour || proximal) estimated as
mean(r - 1 - log r) (k3; 0 when the sampler is the trainer), the mean ratio, and is_masked_fraction,
the share of tokens whose ratio is outside the bound (truncated or masked).
"""

from __future__ import annotations

from typing import Any

MODES = ("token_truncate", "token_mask", "none")
# Loss types whose per-token loss is linear in the advantage (see above); vespo is not.
LINEAR_LOSSES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo")


def behaviour_weights(proximal, behaviour, mask, *, mode: str = "token_truncate", cap: float = 2.0):
    """Per-token weights (B, T) and the batch's statistics. `proximal`, `behaviour`: per-token logprobs
    (B, T) of the trainer now and of the sampler; `mask`: 1 on the tokens the model wrote."""
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
    tokens = int(mask.sum())
    exact = log_ratio.double()[mask]  # float32 rounding would make k3 of tiny differences negative
    k3 = torch.expm1(exact) - exact
    stats = {
        "tokens": tokens,
        "mismatch_kl": max(0.0, float(k3.mean())) if tokens else 0.0,
        "mismatch_logp_abs_max": float(log_ratio[mask].abs().max()) if tokens else 0.0,
        "is_ratio_mean": float(ratio[mask].mean()) if tokens else 1.0,
        "is_masked_fraction": float(outside.sum()) / tokens if tokens else 0.0,
    }
    return weights.detach(), stats


def trainer_class():
    """GRPOTrainer with the correction above (built here: importing TRL takes seconds)."""
    import torch
    from trl import GRPOTrainer
    from trl.models.utils import disable_gradient_checkpointing

    class OffPolicyGRPOTrainer(GRPOTrainer):
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
            mask = output["completion_mask"]
            if "tool_mask" in output:
                mask = mask * output["tool_mask"]
            weights, stats = behaviour_weights(proximal, output["sampling_per_token_logps"], mask,
                                               mode=self.off_policy_mode, cap=self.off_policy_cap)
            if self.off_policy_mode != "none":
                advantages = output["advantages"]
                if advantages.dim() == 1:
                    advantages = advantages.unsqueeze(1)
                output["advantages"] = advantages * weights.to(advantages.dtype)
            for name in ("mismatch_kl", "is_ratio_mean", "is_masked_fraction"):
                self._metrics["train"][f"off_policy/{name}"].append(stats[name])
            if self.on_batch is not None:
                self.on_batch(stats)
            return output

        def _proximal_logps(self, output: dict[str, Any]):
            ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
            attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
            with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
                logps, _, _ = self._get_per_token_logps_and_entropies(
                    self.model, ids, attention, output["completion_ids"].size(1),
                    batch_size=self.args.per_device_train_batch_size)
            return logps

    return OffPolicyGRPOTrainer
