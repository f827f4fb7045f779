"""The KL term under the sampler's correction (offpolicy.py).

TRL adds beta * KL(policy || reference) per token to the loss, estimated on the tokens the rollouts sampled
(k3, times the policy/old ratio with `use_bias_correction_kl`). Those tokens were drawn by the behaviour
policy, not by the proximal one, so the KL term is an expectation under the wrong sampler exactly as the
policy term is: it takes the same per-token weight w = proximal / behaviour (truncated or masked). TRL
computes the KL term inside its loss without a hook, so the difference, beta * (w - 1) * KL, aggregated the
way the loss type aggregates its per-token loss, is added to TRL's loss: the sum is beta * w * KL.
"""

from __future__ import annotations


def weighted_kl_correction(trainer, logps, inputs, weights):
    """What turns TRL's KL term into its weighted one (a scalar tensor with a gradient). `logps`: the policy's
    per-token logprobs of this micro-batch from the loss's own forward pass; `weights`: (B, T)."""
    import torch

    reference = inputs["ref_per_token_logps"]
    kl = torch.exp(reference - logps) - (reference - logps) - 1
    mask = inputs["completion_mask"] if "tool_mask" not in inputs else inputs["completion_mask"] * inputs["tool_mask"]
    if trainer.args.use_bias_correction_kl:
        old = inputs.get("old_per_token_logps")
        log_ratio = logps - (logps.detach() if old is None else old)
        if trainer.importance_sampling_level == "sequence":
            log_ratio = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
        kl = kl * torch.exp(log_ratio)
    return aggregate(trainer, trainer.beta * (weights.to(kl.dtype) - 1.0) * kl, mask, inputs)


def aggregate(trainer, per_token, mask, inputs):
    """A per-token loss (B, T) reduced as TRL's GRPOTrainer reduces its own for `trainer.loss_type`."""
    training = trainer.model.training
    accumulation = trainer.current_gradient_accumulation_steps if training else 1.0
    loss_type = trainer.loss_type
    masked = per_token * mask
    if loss_type in ("grpo", "sapo"):
        return (masked.sum(-1) / mask.sum(-1).clamp(min=1.0)).mean() / accumulation
    if loss_type == "bnpo":
        return masked.sum() / mask.sum().clamp(min=1.0) / accumulation
    if loss_type == "dr_grpo":
        return masked.sum() / (per_token.size(0) * trainer.max_completion_length) / accumulation
    if loss_type in ("dapo", "cispo"):
        normalizer = inputs["num_items_in_batch"].clamp(min=1.0) / trainer.accelerator.num_processes
        if training:
            normalizer = normalizer * trainer.current_gradient_accumulation_steps / trainer.args.steps_per_generation
        return masked.sum() / normalizer
    if loss_type == "luspo":
        return masked.sum(-1).mean() / accumulation
    raise ValueError(f"no KL weighting for loss_type={loss_type}")
