"""Training on trajectories: datasets from the store, recipes, SFT / DPO / GRPO (TRL + PEFT LoRA),
online rollouts through the real agent loop, and rewards. Serving the result: codeagent/serve/.

One job per module:
    recipe.py     recipes (YAML + key=value overrides), strictly validated
    data.py       datasets from the trajectory store (SFT, DPO) and tasks for RL (from codeagent.data)
    sequences.py  token-exact training sequences from recorded steps; chat-template rendering with masks
    modeling.py   loading the base model, LoRA, saving the adapter and its card, memory errors
    sft.py dpo.py   one trainer each
    grpo/         online GRPO: its trainer, rollouts through the real agent loop, rewards, objectives,
                  async mode, held-out evaluation, `train grpo --dry-run` (see grpo/__init__.py)
    dry_run.py    `train sft|dpo --dry-run`; recipe_notes.py the memory notes in the GPU recipes
    grade.py      `codeagent traj grade`: stored runs graded by the harness into verdicts and rewards
    tiny.py toy.py   a tiny model built offline; the toy family's demonstrations and model (its tasks: data/toy.py)
    commands.py   the work of `codeagent train sft|dpo|grpo|merge` and `codeagent traj grade` (the click
                  definitions: cli/train_commands.py, cli/traj_commands.py)

Nothing here imports torch or TRL at module level except the trainer modules themselves.
"""


class TrainError(Exception):
    """A training run cannot start or went wrong in a way the user can fix; the message says how."""
