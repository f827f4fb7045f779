"""Training on trajectories: datasets from the store, recipes, SFT / DPO / GRPO (TRL + PEFT LoRA),
online rollouts through the real agent loop, rewards, and serving the result.

One job per module:
    recipe.py     recipes (YAML + key=value overrides), strictly validated
    data.py       datasets from the trajectory store (SFT, DPO) and tasks for RL (from codeagent.data)
    sequences.py  token-exact training sequences from recorded steps; chat-template rendering with masks
    modeling.py   loading the base model, LoRA, saving the adapter and its card, memory errors
    sft.py dpo.py grpo.py   one trainer each
    rollouts.py   GRPO rollouts: agent runs in sandboxes with the policy being trained
    rewards.py    outcome, patch similarity (SWE-RL), gated step rewards (G-RA)
    grade.py      `codeagent traj grade`: stored runs graded by the harness into verdicts and rewards
    heldout.py    periodic pass@k evaluation on held-out tasks during GRPO
    memory.py     `train grpo --dry-run`: estimated memory per device, refusing what cannot fit
    serve.py      an OpenAI-compatible chat endpoint with tool calling: serve_chat.py the chat logic,
                  serve_http.py the HTTP handler and its refusals, serve_schema.py the request's shape
    tiny.py toy.py   a tiny model built offline; the toy family's demonstrations and model (its tasks: data/toy.py)
    commands.py   `codeagent train sft|dpo|grpo` and `codeagent serve`

Nothing here imports torch or TRL at module level except the trainer modules themselves.
"""


class TrainError(Exception):
    """A training run cannot start or went wrong in a way the user can fix; the message says how."""
