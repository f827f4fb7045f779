"""One token from one row's logits, and its log-probability: the sampling rule of the batched engine
(models/batching.py) and of the one-at-a-time `TransformersGenerator` (models/hf.py).

log_softmax(logits / temperature), before top-p, as the GRPO loss computes it; greedy (temperature 0)
uses the raw logits. Each request has its own seeded generator, so it samples the same way whatever else
shares its batch.
"""

from __future__ import annotations


def seeded_generator(seed: int | None, device):
    import torch

    if seed is None:
        return None
    generator = torch.Generator(device=device)
    generator.manual_seed(int(seed))
    return generator


def pick_token(logits, temperature: float, top_p: float | None, generator) -> tuple[int, float]:
    """One token from one row's logits, and its logprob: under the distribution it is sampled from
    (logits / temperature, before top-p), as the GRPO loss computes it; greedy uses the raw logits."""
    import torch

    if temperature and temperature > 0:
        logp = torch.log_softmax(logits / temperature, dim=-1)
        probs = logp.exp()
        if top_p is not None and 0 < top_p < 1:
            probs = top_p_filter(probs, top_p)
        token = int(torch.multinomial(probs, 1, generator=generator))
    else:
        logp = torch.log_softmax(logits, dim=-1)
        token = int(torch.argmax(logits))
    return token, float(logp[token])


def top_p_filter(probs, top_p: float):
    import torch

    ordered, order = torch.sort(probs, descending=True)
    keep = torch.cumsum(ordered, dim=-1) - ordered < top_p
    keep[0] = True
    filtered = torch.zeros_like(probs)
    filtered[order[keep]] = ordered[keep]
    return filtered / filtered.sum()
