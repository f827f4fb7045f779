"""Training: datasets from the store, recipes, SFT / DPO / GRPO steps with LoRA, serving, errors.

Everything runs on CPU, offline: a tiny Qwen3-style model (random weights) and a byte-level BPE
tokenizer are built in a fixture; TRL, PEFT and the HTTP server are the real ones. The GRPO rollout
test runs the real agent loop in Docker sandboxes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from codeagent.train import TrainError
from tests.support.scripted import native_call as _call
from tests.support.tools import TOOLS

SYSTEM = "You fix bugs."


def run_messages(task: int, good: bool) -> list[list[dict]]:
    """The messages of one scripted run, grouped by step (assistant turn + its tool results)."""
    command = "ls" if good else "rm -rf /"
    return [
        [{"role": "assistant", "content": "", "tool_calls": [_call("c1", "bash", {"command": command})]},
         {"role": "tool", "tool_call_id": "c1", "name": "bash", "content": f"a{task}.py"}],
        [{"role": "assistant", "content": "", "tool_calls": [_call("c2", "submit", {})]},
         {"role": "tool", "tool_call_id": "c2", "name": "submit", "content": "Submitted."}],
    ]


def write_store(root: Path, runs: list[tuple[int, bool | None]]) -> list[str]:
    """Scripted trajectories in a real store: (task number, resolved or None for ungraded)."""
    from codeagent.trajectory.store import TrajectoryStore

    store = TrajectoryStore(root)
    ids = []
    for task, resolved in runs:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"Fix bug {task}."}]
        with store.create(task={"instance_id": f"task-{task}", "repo": "owner/repo"}, model="scripted",
                          tools=TOOLS, messages=messages) as writer:
            for step in run_messages(task, resolved is not False):
                writer.append_step({"finish_reason": "stop"}, step)
            writer.update(exit_status="submitted", patch="diff --git a/x b/x\n")
            if resolved is not None:
                writer.add_verification({"resolved": resolved})
                writer.add_rewards({"resolved": 1.0 if resolved else 0.0})
            ids.append(writer.id)
    return ids


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    import torch

    torch.set_num_threads(1)  # tiny models on a busy 2-core machine: threads only fight


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> Path:
    from codeagent.train.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("tiny-model"), vocab_size=512)


@pytest.fixture(scope="session")
def store(tmp_path_factory) -> Path:
    """Three tasks, each with a resolved and an unresolved run, plus one ungraded run."""
    root = tmp_path_factory.mktemp("store")
    write_store(root, [(1, True), (1, False), (2, True), (2, False), (3, True), (3, False), (4, None)])
    return root


def recipe(method: str, tiny: Path, store: Path, output: Path, *overrides: str):
    from codeagent.train.recipe import load_recipe

    return load_recipe(f"{method}-tiny", [f"model.base={tiny}", f"data.store={store}", f"output_dir={output}",
                                          *overrides])


@pytest.fixture(scope="session")
def sft_adapter(tiny, store, tmp_path_factory) -> Path:
    """An adapter trained until the tiny model writes the resolved runs' tool call (greedy)."""
    from codeagent.train import sft

    output = tmp_path_factory.mktemp("sft-run")
    return sft.run(recipe("sft", tiny, store, output, "trainer.max_steps=120", "trainer.save_steps=1000",
                          "trainer.lr_scheduler_type=constant",
                          "trainer.logging_steps=10"))


# -- recipes and datasets ---------------------------------------------------------------------------

def test_bundled_recipes_are_valid():
    from codeagent.assets import asset_dir
    from codeagent.train.recipe import load_recipe

    names = sorted(path.stem for path in asset_dir("train").glob("*.yaml"))
    assert {"sft-tiny", "dpo-tiny", "grpo-tiny", "sft-qwen7b", "dpo-qwen7b", "grpo-qwen7b"} <= set(names)
    for name in names:
        assert load_recipe(name).method in ("sft", "dpo", "grpo")


def test_unknown_recipe_keys_are_errors(tmp_path):
    from codeagent.train.recipe import load_recipe

    with pytest.raises(TrainError, match=r"unknown key 'lora.alpah'.*did you mean alpha"):
        load_recipe("sft-tiny", ["lora.alpah=8"])
    with pytest.raises(TrainError, match=r"unknown key 'lora.rank'; known keys: alpha, dropout, .*r, "):
        load_recipe("sft-tiny", ["lora.rank=8"])
    with pytest.raises(TrainError, match=r"trainer.learning_rat \(did you mean learning_rate"):
        load_recipe("sft-tiny", ["trainer.learning_rat=0.1"])
    with pytest.raises(TrainError, match="unknown key 'optimizer'"):
        load_recipe("sft-tiny", ["optimizer=adam"])
    with pytest.raises(TrainError, match="for grpo recipes only"):
        load_recipe("sft-tiny", ["rollout.workers=2"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("method: sft\nmodel: {base: x}\ndata: {resolvd: true}\n")
    with pytest.raises(TrainError, match=rf"{bad}.*unknown key 'data.resolvd'.*did you mean resolved"):
        load_recipe(str(bad))
    assert load_recipe("sft-tiny", ["trainer.learning_rate=3e-4"]).trainer["learning_rate"] == 3e-4


def test_store_without_resolved_trajectories_is_a_clear_error(tiny, tmp_path):
    from codeagent.train import sft

    unresolved = tmp_path / "store"
    write_store(unresolved, [(1, False), (2, None)])
    with pytest.raises(TrainError, match=r"no trajectories to train on: 0 of 2 .*not verified as resolved.*"
                                         r"data.resolved=null"):
        sft.run(recipe("sft", tiny, unresolved, tmp_path / "out"))
    assert not (tmp_path / "out" / "adapter").exists()
    with pytest.raises(TrainError, match="no trajectories in"):
        sft.run(recipe("sft", tiny, tmp_path / "empty", tmp_path / "out"))
    from codeagent.train import dpo

    with pytest.raises(TrainError, match="DPO needs, for the same task, a resolved and an unresolved"):
        dpo.run(recipe("dpo", tiny, unresolved, tmp_path / "out"))


def test_missing_base_model_is_a_clear_error(store, tmp_path):
    from codeagent.train import sft

    with pytest.raises(TrainError, match=r"model.base: no model at .*does not exist"):
        sft.run(recipe("sft", tmp_path / "no-such-model", store, tmp_path / "out"))


def test_sft_loss_mask_covers_exactly_the_assistant_tokens(tiny, store, tmp_path):
    """The rows (and TRL's labels built from them) train on each assistant turn, end-of-turn token
    included, and on nothing else: not the system prompt, the tools, the issue or the tool results."""
    from transformers import AutoTokenizer

    from codeagent.train import sft
    from codeagent.train.data import sft_rows
    from codeagent.train.recipe import DataSection

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    rows, summary = sft_rows(DataSection(store=str(store)), tokenizer)
    assert summary["rows"] == 3 and summary["dropped"] == {"not verified as resolved": 4}
    expected = [
        '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call><|im_end|>',
        '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call><|im_end|>',
    ]
    for row in rows:
        spans, current = [], []
        for token, bit in zip(row["input_ids"], row["assistant_masks"]):
            if bit:
                current.append(token)
            elif current:
                spans.append(current)
                current = []
        if current:
            spans.append(current)
        assert [tokenizer.decode(span) for span in spans] == expected
        unmasked = tokenizer.decode([t for t, bit in zip(row["input_ids"], row["assistant_masks"]) if not bit])
        assert SYSTEM in unmasked and "<tool_response>\na1.py" in unmasked or "<tool_response>\na" in unmasked
    trainer, _, _ = sft.build_trainer(recipe("sft", tiny, store, tmp_path / "out"))
    for prepared, row in zip(trainer.train_dataset, rows):
        assert [label != -100 for label in prepared["labels"]] == [bool(bit) for bit in row["assistant_masks"]]


def test_token_exact_sequence_masks_observations(tiny):
    """Recorded ids chain into one sequence: the model's tokens (mask 1) exactly as sampled, the
    observation tokens between turns (mask 0) taken from the next prompt."""
    from codeagent.models import Sampling, make_model
    from codeagent.train.sequences import chain_steps

    model = make_model(f"hf:{tiny}")
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Fix bug 1."}]
    steps = []
    for turn in range(3):
        response = model.complete(messages, TOOLS, Sampling(temperature=1.0, max_tokens=12, seed=turn))
        steps.append({"prompt_token_ids": response.prompt_token_ids, "token_ids": response.token_ids,
                      "logprobs": response.logprobs, "finish_reason": response.finish_reason})
        messages = messages + [response.to_message(), {"role": "user", "content": f"observation {turn}"}]
    sequence = chain_steps(steps)
    assert sequence.prompt_ids == steps[0]["prompt_token_ids"]
    generated = [i for i, bit in zip(sequence.completion_ids, sequence.mask) if bit]
    assert generated == sum((s["token_ids"] for s in steps), [])
    assert [lp for lp, bit in zip(sequence.logprobs, sequence.mask) if bit] == sum((s["logprobs"] for s in steps), [])
    observed = model.tokenizer.decode([i for i, bit in zip(sequence.completion_ids, sequence.mask) if not bit])
    assert "observation 0" in observed and "observation 1" in observed and "observation 2" not in observed
    assert sequence.input_ids == steps[-1]["prompt_token_ids"] + steps[-1]["token_ids"]


# -- trainers ---------------------------------------------------------------------------------------

def test_sft_adapter_reloads_and_generates(sft_adapter, tiny):
    from codeagent.models import Sampling, make_model

    card = (sft_adapter / "README.md").read_text()
    assert "sft" in card and str(tiny) in card and "training_data.json" in card and "learning_rate" in card
    data = json.loads((sft_adapter / "training_data.json").read_text())
    assert data["rows"] == 3 and len(data["trajectory_ids"]) == 3
    metrics = [json.loads(line) for line in (sft_adapter.parent / "metrics.jsonl").read_text().splitlines()]
    assert any("loss" in record for record in metrics)
    model = make_model(f"hf:{sft_adapter}")  # the adapter directory names its base model
    response = model.complete([{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Fix bug 2."}],
                              TOOLS, Sampling(temperature=0.0, max_tokens=40))
    assert response.token_ids and response.format_error is None
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("bash", {"command": "ls"})]


def test_train_merge_folds_the_adapter_into_a_plain_model(sft_adapter, tmp_path):
    """`codeagent train merge`: the merged model computes what base + adapter compute, loads without
    PEFT, and a new LoRA (other targets) can be trained on it; a path that is no adapter is refused."""
    import torch
    from click.testing import CliRunner
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from codeagent.cli import cli
    from codeagent.models.hf import resolve_base

    result = CliRunner().invoke(cli, ["train", "merge", str(sft_adapter), str(tmp_path / "merged")])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "merged" / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").eval()
    base, _ = resolve_base(str(sft_adapter))
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), str(sft_adapter)).eval()
    ids = AutoTokenizer.from_pretrained(tmp_path / "merged")("Fix bug 2.", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert torch.allclose(merged(ids).logits, adapted(ids).logits, atol=1e-4)
        assert not torch.allclose(merged(ids).logits, AutoModelForCausalLM.from_pretrained(base)(ids).logits, atol=1e-4)
    refused = CliRunner().invoke(cli, ["train", "merge", str(tmp_path / "merged"), str(tmp_path / "again")])
    assert refused.exit_code == 3 and "no PEFT adapter" in refused.output


def test_dpo_runs_on_pairs_with_tool_outputs_masked(tiny, store, tmp_path):
    import torch

    from codeagent.train import dpo

    trainer, tokenizer, summary = dpo.build_trainer(recipe("dpo", tiny, store, tmp_path / "out"))
    assert summary["rows"] == 3 and summary["tasks"] == 3
    batch = trainer.data_collator([trainer.train_dataset[0]])
    chosen = batch["input_ids"][0][batch["completion_mask"][0].bool()]
    text = tokenizer.decode(chosen)
    # The prompt is what both runs share (up to `"command": "`); the chosen side is the rest of the resolved
    # run, and of it only what the assistant wrote counts: not the tool results.
    assert tokenizer.decode(trainer.train_dataset[0]["prompt_ids"]).endswith('{"command": "')
    assert text.startswith('ls"}}') and '"name": "submit"' in text
    assert "a1.py" not in text and "Submitted." not in text
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    from codeagent.train.modeling import MetricsFile, train

    final = train(trainer, trainer_recipe := recipe("dpo", tiny, store, tmp_path / "out"),
                  MetricsFile(tmp_path / "m.jsonl"))
    assert final["global_step"] == trainer_recipe.trainer["max_steps"]
    changed = [n for n, p in trainer.model.named_parameters() if p.requires_grad and not torch.equal(p, before[n])]
    assert changed and all("lora" in name for name in changed)


def test_grpo_gradient_raises_the_rewarded_completion(tiny, tmp_path):
    """Two completions of one prompt, one rewarded: GRPO steps (TRL, LoRA, dapo, no KL) raise the
    log-probability of the rewarded one relative to the other."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from codeagent.train.modeling import trl_args
    from codeagent.train.recipe import load_recipe

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    prompt = tokenizer("<|im_start|>user\nFix it<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    good = tokenizer('<tool_call>\n{"name": "submit"}\n</tool_call>', add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    bad = tokenizer("I will not do it.", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]

    def rollout(prompts, trainer):
        completions = [good if i % 2 == 0 else bad for i in range(len(prompts))]
        return {"prompt_ids": [prompt] * len(prompts), "completion_ids": completions,
                "logprobs": [[0.0] * len(c) for c in completions], "is_good": [i % 2 == 0 for i in range(len(prompts))]}

    def reward(prompts, completions, is_good, **_):
        return [1.0 if flag else 0.0 for flag in is_good]

    def gap(model) -> float:
        model.eval()
        with torch.no_grad():
            values = []
            for completion in (good, bad):
                ids = torch.tensor([prompt + completion])
                logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
                values.append(float(logp[torch.arange(len(prompt) - 1, ids.shape[1] - 1), ids[0, len(prompt):]].sum()))
        model.train()
        return values[0] - values[1]

    base = AutoModelForCausalLM.from_pretrained(tiny)
    recipe_ = load_recipe("grpo-tiny", [f"model.base={tiny}", f"output_dir={tmp_path}", "trainer.max_steps=3",
                                        "trainer.num_generations=2", "trainer.per_device_train_batch_size=2",
                                        "trainer.save_steps=100"])
    args = trl_args(recipe_, temperature=1.0)
    assert isinstance(args, GRPOConfig) and args.beta == 0.0 and args.loss_type == "dapo"
    from codeagent.train.modeling import lora_config

    trainer = GRPOTrainer(model=base, reward_funcs=[reward], args=args, processing_class=tokenizer,
                          train_dataset=Dataset.from_list([{"prompt": "fix"}] * 8), rollout_func=rollout,
                          peft_config=lora_config(recipe_))
    before = gap(trainer.model)
    trainer.train()
    after = gap(trainer.model)
    assert after > before + 0.5, (before, after)


def test_out_of_memory_says_what_to_lower(tiny, store, tmp_path):
    """A batch too large for memory (the allocator really refuses it) becomes advice, not a traceback."""
    import torch

    from codeagent.train import sft
    from codeagent.train.modeling import MetricsFile, train

    run = recipe("sft", tiny, store, tmp_path / "out", "trainer.per_device_train_batch_size=3")
    trainer, _, _ = sft.build_trainer(run)

    def allocate_per_sequence(module, args, kwargs):
        batch = kwargs["input_ids"].shape[0]
        torch.empty(batch * 2**40, dtype=torch.float32)  # 4 TiB of activations per sequence: cannot fit

    trainer.model.register_forward_pre_hook(allocate_per_sequence, with_kwargs=True)
    with pytest.raises(TrainError, match=r"ran out of memory.*lower trainer.per_device_train_batch_size \(now 3\)"
                                         r".*gradient_accumulation_steps.*max_length"):
        train(trainer, run, MetricsFile(tmp_path / "m.jsonl"))


def test_resume_from_checkpoint_after_a_kill(tiny, store, tmp_path):
    """A run killed (SIGKILL) after its checkpoint at step 4 resumes there: the second run starts at
    step 4, not 0, and ends at max_steps."""
    output = tmp_path / "run"
    script = textwrap.dedent(f"""
        import os, signal, sys
        from transformers import TrainerCallback
        from codeagent.train import sft
        from codeagent.train.recipe import load_recipe

        class KillAfterSave(TrainerCallback):
            def on_save(self, args, state, control, **kwargs):
                if state.global_step == 4 and os.environ.get("KILL") == "1":
                    os.kill(os.getpid(), signal.SIGKILL)

        recipe = load_recipe("sft-tiny", ["model.base={tiny}", "data.store={store}", "output_dir={output}",
                                          "trainer.max_steps=6", "trainer.save_steps=4"])
        print(sft.run(recipe, callbacks=[KillAfterSave()]))
    """)
    env = {**os.environ, "KILL": "1", "PYTHONWARNINGS": "ignore"}
    killed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert (output / "checkpoint-4").is_dir() and not (output / "adapter").exists()
    resumed = subprocess.run([sys.executable, "-c", script], env={**env, "KILL": "0"}, capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    records = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    resumed_at = [i for i, r in enumerate(records) if r.get("event") == "resumed"]
    assert len(resumed_at) == 1 and records[resumed_at[0]]["checkpoint"].endswith("checkpoint-4")
    steps_after = [r["step"] for r in records[resumed_at[0]:] if "loss" in r]
    assert steps_after == [5, 6]
    metrics = json.loads((output / "adapter" / "metrics.json").read_text())
    assert metrics["global_step"] == 6 and metrics["resumed_from"].endswith("checkpoint-4")


# -- GRPO through the real agent loop ---------------------------------------------------------------

def test_grpo_step_through_the_agent_loop_in_docker(tiny, tmp_path, no_leaks):
    """One GRPO step on the toy family: rollouts are real agent runs in Docker sandboxes with the policy,
    written to the store token-exact, graded by the hidden tests; what TRL trains on is the recorded ids,
    with every observation token masked out of the loss."""
    from codeagent.train.grpo import trainer as grpo
    from codeagent.train.recipe import load_recipe
    from codeagent.train.sequences import chain_steps
    from codeagent.trajectory.store import TrajectoryStore

    rollouts_dir = tmp_path / "rollouts"
    run = load_recipe("grpo-tiny", [f"model.base={tiny}", f"output_dir={tmp_path / 'out'}", "data.tasks=toy:1",
                                    f"rollout.store={rollouts_dir}", "trainer.max_steps=1",
                                    "trainer.num_generations=2", "trainer.per_device_train_batch_size=2",
                                    "rollout.max_tokens=16", "rollout.set={limits.max_steps: 2}",
                                    # keep every run in the loss here, to compare masks (filtering: next test)
                                    "rollout.mask_truncated=false", "rollout.mask_exit_statuses=[]"])
    trainer, _, rollouts, summary = grpo.build_trainer(run)
    seen = []
    trainer.rollout_func = lambda prompts, t: seen.append(rollouts(prompts, t)) or seen[-1]
    trainer.train()
    assert len(seen) == 1
    output = seen[0]
    store = TrajectoryStore(rollouts_dir)
    assert len(store.ids()) == 2
    for index, trajectory_id in enumerate(output["trajectory_id"]):
        trajectory = store.load(trajectory_id)
        assert trajectory.model.startswith("policy:") and trajectory.instance_id == "toy-add-7-2"
        assert "resolved" in trajectory.rewards and trajectory.verification["resolved"] is False
        assert all(step.token_ids and step.prompt_token_ids for step in trajectory.steps)
        sequence = chain_steps(trajectory.steps)
        assert output["prompt_ids"][index] == sequence.prompt_ids
        assert output["completion_ids"][index] == sequence.completion_ids[: len(output["completion_ids"][index])]
        generated = sum((step.token_ids for step in trajectory.steps), [])
        mask = output["env_mask"][index]
        assert mask == sequence.mask[: len(mask)]
        assert [t for t, bit in zip(output["completion_ids"][index], mask) if bit] == generated[: sum(mask)]
        if len(trajectory.steps) == 2:  # the observation between the turns is in the sequence, masked
            assert 0 in mask and mask[: len(trajectory.steps[0].token_ids)] == [1] * len(trajectory.steps[0].token_ids)
        assert len(trajectory.steps) <= 2
    assert rollouts.history[0]["rollouts"] == 2 and summary["tasks"] == ["toy-add-7-2"]
    # The same recorded runs are SFT data as they are: token-exact rows, no re-tokenization.
    from codeagent.train.data import sft_rows
    from codeagent.train.recipe import DataSection

    rows, data = sft_rows(DataSection(store=str(rollouts_dir), resolved=None, max_format_errors=None),
                          trainer.processing_class)  # a random model: its turns are malformed, kept here
    assert data["rows"] == data["token_exact_rows"] == 2
    for row in rows:
        sequence = chain_steps(store.load(row["trajectory_id"]).steps)
        assert row["input_ids"] == sequence.input_ids and row["assistant_masks"] == sequence.assistant_mask


def test_compact_filtering_masks_runs_that_hit_a_limit(tiny):
    """Runs that hit the step/time/cost limit, replies cut at max_tokens, and sequences longer than
    max_completion_length keep their reward but leave the loss (env_mask all 0)."""
    from codeagent.train.grpo.rollouts import Rollout, Rollouts
    from codeagent.train.recipe import load_recipe
    from codeagent.trajectory.schema import Step, Trajectory

    recipe_ = load_recipe("grpo-tiny", [f"model.base={tiny}", "trainer.max_completion_length=12"])
    rollouts = Rollouts(recipe_, [], tokenizer=type("T", (), {"eos_token_id": 2})(), config=None, store=None)

    def trajectory(status: str, finish: str = "stop", length: int = 3) -> Trajectory:
        steps = [Step(prompt_token_ids=[5, 6], token_ids=[7] * length, logprobs=[-0.1] * length, finish_reason=finish)]
        return Trajectory(id="t", exit_status=status, steps=steps)

    assert rollouts._sequence(trajectory("submitted"))[1] is None
    assert rollouts._sequence(trajectory("max_steps"))[1] == "exit status max_steps"
    assert "cut at max_tokens" in rollouts._sequence(trajectory("submitted", finish="length"))[1]
    sequence, why = rollouts._sequence(trajectory("submitted", length=20))
    assert "max_completion_length=12" in why and len(sequence.completion_ids) == 12
    out = rollouts.to_trl([Rollout("a", sequence=sequence, masked=why, rewards={"resolved": 1.0}),
                           Rollout("b", sequence=rollouts._sequence(trajectory("submitted"))[0], rewards={})])
    assert out["env_mask"] == [[0] * 12, [1, 1, 1]] and out["reward_resolved"] == [1.0, 0.0]


# -- serving ----------------------------------------------------------------------------------------

def test_served_model_answers_a_tool_call_through_litellm(sft_adapter):
    from codeagent.models import Sampling
    from codeagent.models.litellm_model import LiteLLMModel
    from codeagent.serve.server import Server, load_served_model

    with Server(load_served_model(str(sft_adapter), max_new_tokens=40), name="tiny", port=0) as server:
        import litellm

        raw = litellm.completion(model="hosted_vllm/tiny", api_base=server.url, api_key="EMPTY", tools=TOOLS,
                                 temperature=0, messages=[{"role": "system", "content": SYSTEM},
                                                          {"role": "user", "content": "Fix bug 3."}])
        call = raw.choices[0].message.tool_calls[0]
        assert call.function.name == "bash" and json.loads(call.function.arguments) == {"command": "ls"}
        assert raw.choices[0].finish_reason == "tool_calls"
        # codeagent's own litellm backend (what `codeagent solve --model hosted_vllm/... --api-base` uses)
        model = LiteLLMModel("hosted_vllm/tiny", api_base=server.url, retries=0)
        response = model.complete([{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Fix bug 1."}],
                                  TOOLS, Sampling(temperature=0.0))
        assert [(c.name, c.arguments) for c in response.tool_calls] == [("bash", {"command": "ls"})]
        import urllib.request

        with urllib.request.urlopen(f"{server.url}/models") as reply:
            assert json.loads(reply.read())["data"][0]["id"] == "tiny"


# -- the CLI ----------------------------------------------------------------------------------------

def test_cli_reports_user_errors_in_one_line(tiny, store, tmp_path):
    from click.testing import CliRunner

    from codeagent.cli.serve_command import serve
    from codeagent.cli.train_commands import train_group

    runner = CliRunner()
    result = runner.invoke(train_group, ["sft", "-c", "sft-tiny", "lora.rnk=4"])
    assert result.exit_code == 3 and "unknown key 'lora.rnk'" in result.output
    result = runner.invoke(train_group, ["dpo", "-c", "sft-tiny"])
    assert result.exit_code == 3 and "is a sft recipe" in result.output
    result = runner.invoke(train_group, ["sft", "-c", "sft-tiny", f"model.base={tmp_path}/nope", f"data.store={store}"])
    assert result.exit_code == 3 and "does not exist" in result.output
    result = runner.invoke(serve, ["--model", str(tmp_path / "nope")])
    assert result.exit_code == 3 and "does not exist" in result.output
