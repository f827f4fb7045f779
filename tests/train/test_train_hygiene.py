"""Training hygiene: rewards as their papers define them (SWE-RL, G-RA), infrastructure failures left
out of the loss, uniform groups counted and dropped, the recipe's LoRA settings honoured when an
adapter is continued, dropout off in GRPO. CPU only, fast: no Docker, a tiny model built offline."""

from __future__ import annotations

import json

import pytest

from codeagent.train import TrainError
from tests.support.trajectories import edit_test_submit

GOLD = ("diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,3 +1,3 @@\n def f():\n-    return 1\n"
        "+    return 2\n x = 0\n")


# -- SWE-RL similarity --------------------------------------------------------------------------------

def test_swe_rl_similarity_compares_each_files_diff_with_context():
    """Hand-computed: a.py's change with its context is 60 characters
    ('@@ -1,3 +1,3 @@' 15 + ' def f():' 9 + '-    return 1' 13 + '+    return 2' 13 + ' x = 0' 6 + 4 newlines);
    the prediction differs in one of them, so the ratio is 2*59/120; b.py is changed by the prediction
    only (0). The mean over the two files is 59/120."""
    from codeagent.train.grpo.rewards import patch_similarity

    pred = GOLD.replace("+    return 2", "+    return 3") + (
        "diff --git a/b.py b/b.py\n--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-y = 1\n+y = 2\n")
    assert patch_similarity(pred, GOLD) == pytest.approx(59 / 120)
    assert patch_similarity(GOLD, GOLD) == 1.0


def test_swe_rl_similarity_sees_the_context_lines():
    """The same changed lines in another place of the file are not the same change."""
    from codeagent.train.grpo.rewards import patch_similarity

    elsewhere = GOLD.replace("@@ -1,3 +1,3 @@\n def f():", "@@ -40,3 +40,3 @@\n def g():").replace(" x = 0", " y = 9")
    assert patch_similarity(elsewhere, GOLD) < 0.95  # changed lines alone: 1.0


def test_swe_rl_gives_minus_one_for_an_empty_or_malformed_answer():
    from codeagent.train.grpo.rewards import patch_similarity

    assert patch_similarity("", GOLD) == -1.0
    assert patch_similarity(None, GOLD) == -1.0
    assert patch_similarity("I fixed it, trust me.\n", GOLD) == -1.0
    assert patch_similarity(GOLD, None) is None  # no gold patch: nothing to compare with


# -- G-RA ---------------------------------------------------------------------------------------------

def test_gra_accumulates_step_rewards_only_past_the_gate_and_counts_bash_edits():
    """Hand-computed with signals well_formed, tool_ok, edited, tested:
    step 1 (sed -i, ok): 1, 1, 1 (an edit through bash), 0 -> 0.75; step 2 (pytest, exit 1): 1, 0, 0, 1
    -> 0.5; step 3 (submit): 1, 1, 0, 0 -> 0.5. Resolved: the steps component is their sum, 1.75 (G-RA's
    accumulation, asked for: the default averages them), and each step's value is kept; unresolved (gate
    1.0): 0, every step 0."""
    from codeagent.train.grpo import rewards
    from codeagent.train.recipe import RewardsSection

    weights = RewardsSection(resolved=1.0, steps=0.5, steps_gate=1.0, steps_aggregate="sum",
                             step_signals=["well_formed", "tool_ok", "edited", "tested"])
    won = rewards.compute(edit_test_submit(), resolved=True, gold_patch=None, weights=weights)
    assert won["step_rewards"] == [0.75, 0.5, 0.5] and won["steps"] == 1.75
    assert won["total"] == pytest.approx(1.0 + 0.5 * 1.75)
    lost = rewards.compute(edit_test_submit(), resolved=False, gold_patch=None, weights=weights)
    assert lost["step_rewards"] == [0.0, 0.0, 0.0] and lost["steps"] == 0.0 and lost["total"] == 0.0
    assert lost["steps_ungated"] == 1.75


@pytest.mark.parametrize("command, writes", [
    ("sed -i 's/a/b/' x.py", True), ("echo 'x = 1' > x.py", True), ("cat >> notes.txt <<EOF", True),
    ("python -c \"open('x.py', 'w').write('')\"", True), ("git apply fix.diff", True),
    ("grep -rn foo . 2>&1 | head", False), ("pytest -q > /dev/null", False), ("ls -la", False),
    ("cat x.py", False),
])
def test_bash_commands_that_write_files_count_as_edits(command, writes):
    from codeagent.train.grpo.rewards import writes_files

    assert writes_files(command) is writes


# -- rollout hygiene ----------------------------------------------------------------------------------

def _rollouts(*overrides):
    from codeagent.train.grpo.rollouts import Rollouts
    from codeagent.train.recipe import load_recipe

    recipe = load_recipe("grpo-tiny", ["model.base=unused", "trainer.num_generations=3", *overrides])
    return Rollouts(recipe, [], tokenizer=type("T", (), {"eos_token_id": 2})(), config=None, store=None)


def _results():
    from codeagent.train.grpo.rollouts import Rollout
    from codeagent.train.sequences import TokenSequence

    def scored(name, value):
        return Rollout(name, sequence=TokenSequence([5], [7, 8], [1, 1], [-0.1, -0.1]),
                       rewards={"resolved": value, "total": value})

    broken = Rollout("a", masked="rollout failed: X", infra_failure="rollout failed: X",
                     rewards={"resolved": None, "total": None})
    return [broken, scored("a", 1.0), scored("a", 0.0), scored("b", 0.0), scored("b", 0.0), scored("b", 0.0)]


def test_infrastructure_failures_get_no_reward_and_uniform_groups_are_counted():
    rollouts = _rollouts()
    results = _results()
    out = rollouts.to_trl(results)
    assert out["reward_resolved"] == [None, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert out["env_mask"][0] == [0] and out["env_mask"][3] == [1, 1]  # not dropped unless asked
    summary = rollouts.summarize(results, step=0, seconds=1.0)
    assert summary["infra_failures"] == 1 and summary["groups"] == 2 and summary["uniform_groups"] == 1
    assert summary["reward_mean"] == pytest.approx(1 / 5) and summary["rewards"][0] is None
    assert summary["resolved_rate"] == pytest.approx(1 / 5)


def test_uniform_groups_leave_the_loss_when_the_recipe_says_so():
    out = _rollouts("rollout.drop_uniform_groups=true").to_trl(_results())
    assert out["env_mask"][3:] == [[0, 0]] * 3 and out["env_mask"][1] == [1, 1]


def test_a_rollout_that_crashes_is_an_infrastructure_failure_not_a_zero(tmp_path):
    """The sandbox cannot open (no such repository): reward None, masked, said why."""
    from codeagent.config import Config
    from codeagent.task import Task
    from codeagent.train.grpo.rollouts import Rollouts, infrastructure_failure
    from codeagent.train.recipe import load_recipe
    from codeagent.trajectory.store import TrajectoryStore

    recipe = load_recipe("grpo-tiny", ["model.base=unused", f"output_dir={tmp_path}"])
    config = Config.model_validate({"sandbox": {"kind": "local"}})
    task = Task(repo=str(tmp_path / "missing"), problem_statement="fix", instance_id="t-1")
    rollouts = Rollouts(recipe, [task], tokenizer=type("T", (), {"eos_token_id": 2})(), config=config, store=TrajectoryStore(tmp_path / "s"))
    result = rollouts.run_one(task, policy=None, group_id="g", index=0)
    assert result.infra_failure and result.masked and result.rewards["resolved"] is None
    assert rollouts.to_trl([result])["reward_resolved"] == [None]
    assert infrastructure_failure("sandbox_error", None) and infrastructure_failure("submitted", "harness_error")
    assert infrastructure_failure("submitted", "unresolved") is None


# -- LoRA and dropout ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_with_adapter(tmp_path_factory):
    """A tiny model and an adapter trained with r=16, alpha=32, dropout 0.05 (as an SFT run leaves it)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from codeagent.train.tiny import build_tiny

    root = tmp_path_factory.mktemp("tiny")
    base = build_tiny(root / "model", vocab_size=300)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base),
                           LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules="all-linear",
                                      task_type="CAUSAL_LM"))
    model.save_pretrained(str(root / "adapter"))
    return base, root / "adapter"


def test_a_lora_section_that_conflicts_with_the_continued_adapter_is_refused(tiny_with_adapter):
    from codeagent.train.modeling import load_base
    from codeagent.train.recipe import load_recipe

    base, adapter = tiny_with_adapter
    recipe = load_recipe("grpo-tiny", [f"model.base={base}", f"model.adapter={adapter}", "lora.r=64"])
    with pytest.raises(TrainError, match=r"r=64 \(the adapter has r=16\).*model.adapter=null"):
        load_base(recipe)


def test_grpo_continues_an_adapter_with_dropout_off(tiny_with_adapter):
    import torch

    from codeagent.train.modeling import load_base
    from codeagent.train.recipe import load_recipe

    base, adapter = tiny_with_adapter
    recipe = load_recipe("grpo-tiny", [f"model.base={base}", f"model.adapter={adapter}"])
    model, _ = load_base(recipe)
    dropouts = [layer for module in model.modules()
                for layer in (getattr(module, "lora_dropout", None) or {}).values()]
    assert dropouts and all(not isinstance(layer, torch.nn.Dropout) or layer.p == 0 for layer in dropouts)
    assert all(config.lora_dropout == 0 for config in model.peft_config.values())


def test_grpo_refuses_lora_dropout_and_defaults_it_off():
    from codeagent.train.recipe import Recipe, load_recipe, validate_recipe

    with pytest.raises(TrainError, match="lora.dropout=0.1.*sample without dropout"):
        load_recipe("grpo-tiny", ["model.base=x", "lora.dropout=0.1"])
    recipe = validate_recipe({"method": "grpo", "model": {"base": "x"}, "lora": {"r": 8}})
    assert isinstance(recipe, Recipe) and recipe.lora.dropout == 0.0
    sft = validate_recipe({"method": "sft", "model": {"base": "x"}})
    assert sft.lora.dropout == 0.05


# -- memory per device (--dry-run) --------------------------------------------------------------------

def test_memory_estimate_is_hand_checkable(tmp_path):
    """A 2-layer model whose shape is written here: weights and logits computed by hand."""
    from codeagent.train.grpo.memory import GiB, estimate
    from codeagent.train.recipe import load_recipe

    (tmp_path / "config.json").write_text(json.dumps({
        "hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 1000, "tie_word_embeddings": True}))
    recipe = load_recipe("grpo-tiny", [f"model.base={tmp_path}", "model.dtype=bfloat16",
                                       "trainer.per_device_train_batch_size=2", "trainer.max_completion_length=100"])
    values = estimate(recipe, prompt_tokens=28)
    # per layer: q 64x64, k 64x32, v 64x32, o 64x64, gate/up 64x128, down 128x64 -> 36864; 2 layers + 1000x64 tied
    assert values["weights"] * GiB == pytest.approx((2 * 36864 + 64000) * 2)
    # TRL's fused head: one bf16 tile of the 2 x 100 scored tokens x 32,768, their hidden states (bf16) and gradient (fp32)
    assert values["logits"] * GiB == pytest.approx(200 * 32768 * 2 + 200 * 64 * (2 + 4))
    assert values["vllm"] == 0 and values["sequence"] == 128


def test_dry_run_refuses_a_recipe_that_cannot_fit_and_names_the_knob():
    import subprocess
    import sys

    base = [sys.executable, "-m", "codeagent.cli", "train", "grpo", "-c", "grpo-qwen7b", "--dry-run"]
    fits = subprocess.run(base, capture_output=True, text=True, timeout=120)
    assert fits.returncode == 0, fits.stderr
    assert "logits" in fits.stdout and "of 80 GiB" in fits.stdout and "not measured on a GPU" in fits.stdout
    big = subprocess.run([*base, "trainer.per_device_train_batch_size=8", "trainer.max_completion_length=32768"],
                         capture_output=True, text=True, timeout=120)
    assert big.returncode == 3
    assert "error: the recipe needs about" in big.stderr and "lower trainer.per_device_train_batch_size" in big.stderr
    assert "Traceback" not in big.stderr


def test_trl_trains_with_none_rewards_and_leaves_them_out(tiny_with_adapter, tmp_path):
    """A real GRPO step (TRL, as installed) on a batch where one completion has reward None: it trains,
    and the logged reward is the mean of the three scored ones (2/3), not of four with a 0."""
    import os

    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    from codeagent.train.grpo import rewards
    from codeagent.train.modeling import lora_config, trl_args
    from codeagent.train.recipe import load_recipe

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    base, _ = tiny_with_adapter
    tokenizer = AutoTokenizer.from_pretrained(base)
    prompt = tokenizer("<|im_start|>user\nFix it<|im_end|>\n", add_special_tokens=False)["input_ids"]
    completion = tokenizer("hello", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]

    def rollout(prompts, trainer):
        count = len(prompts)
        return {"prompt_ids": [prompt] * count, "completion_ids": [completion] * count,
                "logprobs": [[0.0] * len(completion)] * count, "reward_resolved": [None, 1.0, 0.0, 1.0][:count]}

    recipe = load_recipe("grpo-tiny", [f"model.base={base}", f"output_dir={tmp_path}", "trainer.max_steps=1",
                                       "trainer.num_generations=4", "trainer.per_device_train_batch_size=4",
                                       "trainer.save_steps=100"])
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(base), args=trl_args(recipe, temperature=1.0),
                          reward_funcs=[rewards.reward_function("resolved")], processing_class=tokenizer,
                          train_dataset=Dataset.from_list([{"prompt": "fix"}] * 4), rollout_func=rollout,
                          peft_config=lora_config(recipe))
    trainer.train()
    assert trainer.state.log_history[0]["reward"] == pytest.approx(2 / 3, abs=1e-6)


# -- held-out evaluation during GRPO ------------------------------------------------------------------

def test_pass_at_k_by_hand():
    from codeagent.train.grpo.heldout import pass_at_k

    assert pass_at_k(4, 1, 1) == 0.25
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k(4, 0, 4) == 0.0 and pass_at_k(4, 2, 4) == 1.0 and pass_at_k(1, 1, 4) == 1.0


def test_eval_every_needs_a_held_out_split(tiny_with_adapter):
    from codeagent.train.grpo import trainer as grpo
    from codeagent.train.recipe import load_recipe

    base, _ = tiny_with_adapter
    recipe = load_recipe("grpo-tiny", [f"model.base={base}", "data.tasks=toy:2", "rollout.eval_every=1"])
    with pytest.raises(TrainError, match="set data.held_out"):
        grpo.build_trainer(recipe)


def test_memory_per_device_on_several_devices_is_hand_checkable(tmp_path):
    """The same 2-layer model on 4 devices: ZeRO-3 splits the weights and every LoRA state 4 ways and
    keeps a 2-layer gather buffer; ZeRO-2 splits gradients and optimizer states only; DDP nothing.
    Transformers generation adds a phase with the whole model gathered and the KV cache of every
    conversation in flight."""
    from codeagent.models.batching import DEFAULT_KV_CACHE_BYTES
    from codeagent.train.grpo.memory import GiB, estimate, layout_from_accelerate
    from codeagent.train.recipe import load_recipe

    (tmp_path / "config.json").write_text(json.dumps({
        "hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 1000, "tie_word_embeddings": True}))
    layouts = {}
    for name, stage in (("zero3", 3), ("zero2", 2)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(f"distributed_type: DEEPSPEED\nnum_processes: 4\ndeepspeed_config:\n  zero_stage: {stage}\n")
        layouts[name] = layout_from_accelerate(path)
    (tmp_path / "ddp.yaml").write_text("distributed_type: MULTI_GPU\nnum_processes: 4\n")
    layouts["ddp"] = layout_from_accelerate(tmp_path / "ddp.yaml")
    recipe = load_recipe("grpo-tiny", [f"model.base={tmp_path}", "model.dtype=bfloat16", "lora.r=2",
                                       "lora.target_modules=[q_proj]", "trainer.per_device_train_batch_size=1",
                                       "trainer.max_completion_length=100", "rollout.generation=transformers",
                                       "rollout.workers=3", "trainer.optim=adamw_torch"])
    values = {name: estimate(recipe, prompt_tokens=28, layout=layout) for name, layout in layouts.items()}
    weights = (2 * 36864 + 64000) * 2  # as in the test above
    lora = 2 * 2 * (64 + 64)  # 2 layers x r=2 x (in + out) of q_proj: 512 trainable parameters
    assert values["ddp"]["weights"] * GiB == pytest.approx(weights)
    assert values["zero2"]["weights"] * GiB == pytest.approx(weights)
    assert values["zero3"]["weights"] * GiB == pytest.approx(weights / 4)
    # fp32 weight + fp32 gradient + 2 Adam values, 4 bytes each
    assert values["ddp"]["lora+optimizer"] * GiB == pytest.approx(lora * 16)
    assert values["zero2"]["lora+optimizer"] * GiB == pytest.approx(lora * (4 + 4 / 4 + 8 / 4))
    assert values["zero3"]["lora+optimizer"] * GiB == pytest.approx(lora * 16 / 4)
    assert values["zero3"]["gather buffer"] * GiB == pytest.approx(2 * 36864 * 2)
    assert values["ddp"]["gather buffer"] == 0
    # generation: the whole model on every device; KV: 3 conversations x 128 tokens x 2 layers x
    # (keys, values) x 2 kv heads x 16 dims x 2 bytes, plus the prompt cache at its bound
    assert values["zero3"]["weights (gathered)"] * GiB == pytest.approx(weights)
    assert values["zero3"]["kv cache"] * GiB == pytest.approx(3 * 128 * 2 * 2 * 2 * 16 * 2 + DEFAULT_KV_CACHE_BYTES)
    assert values["zero3"]["prefill"] * GiB == pytest.approx(3 * 28 * (4 * 64 + 3 * 128) * 2)
    assert values["zero3"]["total"] == max(values["zero3"]["training"], values["zero3"]["generation"])


def test_the_8gpu_recipe_fits_under_zero3_and_is_refused_under_ddp_naming_sharding():
    import subprocess
    import sys

    base = [sys.executable, "-m", "codeagent.cli", "train", "grpo", "-c", "grpo-qwen7b-8gpu", "--dry-run"]
    fits = subprocess.run(base, capture_output=True, text=True, timeout=120)
    assert fits.returncode == 0, fits.stderr
    assert "8 device(s), zero3" in fits.stdout and "of 80 GiB" in fits.stdout
    longer = [*base, "trainer.max_completion_length=57344"]  # ~70 GiB under ZeRO-3, ~85 GiB under DDP
    assert subprocess.run(longer, capture_output=True, text=True, timeout=120).returncode == 0
    ddp = subprocess.run([*longer, "--accelerate-config", "train/accelerate/multi-gpu.yaml"], capture_output=True,
                         text=True, timeout=120)
    assert ddp.returncode == 3 and "8 device(s), ddp" in ddp.stderr
    assert "weights (14.2 GiB): shard the model (ZeRO-3" in ddp.stderr and "Traceback" not in ddp.stderr
    many = subprocess.run([*base, "rollout.generation=transformers", "rollout.workers=64"], capture_output=True,
                          text=True, timeout=120)
    assert many.returncode == 3 and "generation is the peak" in many.stderr
    assert "kv cache" in many.stderr and "lower rollout.workers" in many.stderr


# -- the process group's timeout ----------------------------------------------------------------------

def test_the_process_group_waits_longer_than_a_rollout_batch_and_the_recipe_sets_how_long(tmp_path):
    """torch's default (30 min) is shorter than one rollout batch (agent runs up to 30 min, then grading):
    ranks waiting at a collective would be killed. The recipe's distributed.timeout_seconds (4 h by
    default) is TRL's ddp_timeout, which transformers gives the process group."""
    from codeagent.train.modeling import trl_args
    from codeagent.train.recipe import load_recipe

    base = ["model.base=x", f"output_dir={tmp_path}"]
    assert trl_args(load_recipe("grpo-tiny", base)).ddp_timeout == 4 * 3600
    assert trl_args(load_recipe("grpo-tiny", [*base, "distributed.timeout_seconds=36000"])).ddp_timeout == 36000
    with pytest.raises(TrainError, match=r"set `distributed.timeout_seconds` in the recipe, not trainer.ddp_timeout"):
        load_recipe("grpo-tiny", [*base, "trainer.ddp_timeout=60"])
    with pytest.raises(TrainError, match="timeout_seconds"):
        load_recipe("grpo-tiny", [*base, "distributed.timeout_seconds=0"])


def test_a_group_split_over_ranks_is_judged_on_all_its_rewards(monkeypatch):
    """4 generations per task, 2 per rank (TRL hands each rank a contiguous slice of a a a a b b b b):
    each rank holds half of each group. Task a: rank 0's half scored 1, 1 and rank 1's 0, 0: each half
    looks uniform alone, the group is not, and neither rank drops it. Task b: 0 everywhere, dropped on
    both. The ranks' rewards come from accelerate's gather_object (stood in with what two ranks give)."""
    from types import SimpleNamespace

    import accelerate.utils

    from codeagent.train.grpo.rollouts import Rollout
    from codeagent.train.sequences import TokenSequence

    def scored(name, value):
        return Rollout(name, sequence=TokenSequence([5], [7, 8], [1, 1], [-0.1, -0.1]),
                       rewards={"resolved": value, "total": value})

    ranks = {task: [[scored(task, first)] * 2, [scored(task, second)] * 2]
             for task, first, second in (("a", 1.0, 0.0), ("b", 0.0, 0.0))}
    rollouts = _rollouts("trainer.num_generations=4", "rollout.drop_uniform_groups=true")
    for task, expected in (("a", [[1, 1]] * 2), ("b", [[0, 0]] * 2)):
        parts = ranks[task]
        monkeypatch.setattr(accelerate.utils, "gather_object",
                            lambda local, parts=parts: [[(r.instance_id, r.rewards["total"]) for r in p] for p in parts])
        for index, local in enumerate(parts):
            trainer = SimpleNamespace(accelerator=SimpleNamespace(num_processes=2, process_index=index))
            uniform = set(rollouts.uniform_group_members(local, trainer))
            assert rollouts.to_trl(local, uniform=uniform)["env_mask"] == expected, (task, index)
