"""Does online GRPO through the real agent loop learn something that generalizes? A CPU benchmark on
the `verbs` toy family (evals/toy/verbs.yaml), on tasks it never trained on.

    python bench/grpo_learns.py [--seeds 0 1 2] [--grpo-steps N] [--eval-rollouts 2] [--work DIR]

Each task is a one-module repository whose function applies `%`; the issue names the operation it
must do (add / subtract / multiply / floor-divide). The right edit depends on the issue text. The
held-out tasks use module and function names never seen in training; each operator is right for a
quarter of them, so answering the same edit every time scores 0.25 there.

1. Noisy demonstrations (once, shared by the seeds): one candidate edit per TRAINING task, run by a
   scripted model through the real agent loop in Docker and graded by the hidden tests. Each restates
   the issue's verb with the operator it uses (`set -- add=-; sed ...`), and every (verb, edit) pair is
   demonstrated equally often: one in four is right, and which one is right is not what the
   demonstrations teach.
2. Per seed: a tiny Qwen3-style model built offline (random weights from the seed; BPE tokenizer
   trained on the demonstrations only), SFT on all the demonstrations (train/sft-toy.yaml): the
   baseline, which learns the format and a near-uniform choice of the edit.
3. Online GRPO on the SFT model (its adapter merged; a new adapter on every linear layer,
   train/grpo-toy.yaml) on the training tasks: every rollout is an agent run in a Docker sandbox with
   the policy being trained, token-exact, rewarded by the hidden tests. The mean reward of every step
   is the curve.
4. Both adapters on the HELD-OUT tasks: the same number of fresh rollouts per task, sampled at the same
   temperature (the recipe's rollout.temperature), graded by the hidden tests.
Prints a table and writes every seed's figures and curve to bench/results/grpo_learns.md (--results).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AIM_HELD_OUT, AIM_RATIO = 0.75, 2.0


def stage(title: str) -> float:
    print(f"\n== {title}", flush=True)
    return time.monotonic()


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def evaluate(adapter: Path, base: Path, tasks, per_task: int, store_dir: Path, workers: int, seed: int) -> dict:
    """Fresh rollouts (no training) with a saved adapter, `per_task` per task, at the GRPO recipe's
    sampling temperature. Per-task rewards; infrastructure failures (reward None) are left out."""
    from concurrent.futures import ThreadPoolExecutor

    import torch

    from codeagent.models.hf import HFModel
    from codeagent.train.grpo.rollouts import Rollouts
    from codeagent.train.grpo.trainer import agent_config
    from codeagent.train.recipe import load_recipe
    from codeagent.trajectory.store import TrajectoryStore

    torch.manual_seed(seed)
    recipe = load_recipe("grpo-toy", [f"model.base={base}", f"output_dir={store_dir}"])
    policy = HFModel.load(str(adapter), max_new_tokens=recipe.rollout.max_tokens)
    rollouts = Rollouts(recipe, tasks, policy.tokenizer, agent_config(recipe), TrajectoryStore(store_dir))
    jobs = [(task, index) for task in tasks for index in range(per_task)]
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(
                lambda job: rollouts.run_one(job[0], policy, f"eval-{adapter.parent.name}-{job[0].instance_id}", job[1]),
                jobs))
    finally:
        policy.close()
    per_task: dict[str, list[float]] = {}
    for result in results:
        if result.rewards.get("total") is not None:
            per_task.setdefault(result.instance_id, []).append(float(result.rewards["total"]))
    rewards = [value for values in per_task.values() for value in values]
    return {"mean": sum(rewards) / max(1, len(rewards)), "rollouts": len(rewards),
            "infra_failures": len(results) - len(rewards), "temperature": recipe.rollout.temperature,
            "per_task": {task: sum(v) / len(v) for task, v in per_task.items()}}


def choice_probabilities(base: Path, adapter: Path, demos: Path, tasks) -> dict:
    """Why a policy scores what it scores, without sampling: for each task, the probability that the
    policy restates the issue's verb (among the four verbs) and, given the right verb, that it then
    writes the right edit (the rest of the command, whose operator is the choice; among the four),
    from the prompt a rollout starts with (a demonstration's, with the task's issue in place of the
    demonstration's)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from codeagent.data.toy import family
    from codeagent.models.hf import template_messages
    from codeagent.train.toy import VERBS_EDIT
    from codeagent.trajectory.store import TrajectoryStore

    spec = family("verbs")
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), str(adapter)).eval()
    demo = next(TrajectoryStore(demos).iter())
    text = tokenizer.apply_chat_template(template_messages(demo.messages), tools=demo.tools, tokenize=False)
    before_verb, after_verb = VERBS_EDIT.split("{verb}")
    prefix = text[:text.index(before_verb) + len(before_verb)]
    shown = next(m["content"] for m in demo.messages if m["role"] == "user")
    issue = next(line for line in shown.splitlines() if " must " in line)

    def logprob(context: str, continuation: str) -> float:
        ids, head = tokenizer(context + continuation)["input_ids"], tokenizer(context)["input_ids"]
        start = next((i for i, (a, b) in enumerate(zip(ids, head)) if a != b), len(head))  # first token that differs
        with torch.no_grad():
            logps = torch.log_softmax(model(torch.tensor([ids])).logits[0, :-1].float(), -1)
        return sum(logps[i - 1, ids[i]].item() for i in range(start, len(ids)))

    rows = {}
    for task in tasks:
        context = prefix.replace(issue, task.problem_statement)
        ops, verb = spec["candidates"], task.toy_verb
        verbs = torch.softmax(torch.tensor([logprob(context, spec["verbs"][op]) for op in ops]), -1)
        edits = torch.softmax(torch.tensor([logprob(context + verb, json.dumps(after_verb.format(operator=op))[1:-1])
                                            for op in ops]), -1)  # as the tool call's JSON string writes it
        right = ops.index(task.toy_operator)
        rows[task.instance_id] = {"verb": round(verbs[right].item(), 3), "edit": round(edits[right].item(), 3)}
    mean = lambda key: round(sum(r[key] for r in rows.values()) / len(rows), 3)  # noqa: E731
    return {"verb": mean("verb"), "edit_given_verb": mean("edit"), "per_task": rows}


def constant_policy_scores(tasks) -> dict[str, float]:
    """What answering the same edit every time scores on `tasks` (the hidden tests accept exactly one)."""
    from codeagent.data.toy import family

    return {op: sum(task.toy_operator == op for task in tasks) / len(tasks)
            for op in family("verbs")["candidates"]}


def run_seed(seed: int, args, work: Path, demos: Path, train_tasks, held_out) -> dict:
    from codeagent.train import sft
    from codeagent.train.grpo import trainer as grpo
    from codeagent.train.modeling import merge_adapter
    from codeagent.train.recipe import load_recipe
    from codeagent.train.toy import build_toy_model

    root = work / f"seed-{seed}"
    root.mkdir(parents=True, exist_ok=True)
    done = root / "result.json"
    if done.is_file():  # a finished seed of an earlier launch with the same --work: kept as it was measured
        print(f"\n== [seed {seed}] finished earlier: {done}", flush=True)
        return json.loads(done.read_text())
    started, load_start = time.monotonic(), load_average()
    timings = {}

    t = stage(f"[seed {seed}] tiny model built offline")
    base = root / "toy-model"
    if not (base / "config.json").is_file():
        build_toy_model(base, demos, seed=seed, word_boundaries=True, hidden_size=128, intermediate_size=256, head_dim=32)
    timings["model"] = time.monotonic() - t

    t = stage(f"[seed {seed}] SFT on the noisy demonstrations")
    sft_out = root / "sft"
    sft_adapter = sft_out / "adapter"
    if not (sft_adapter / "adapter_config.json").is_file():
        sft.run(load_recipe("sft-toy", [f"model.base={base}", f"data.store={demos}", f"output_dir={sft_out}",
                                        f"seed={seed}", *args.sft_set]))
    timings["sft"] = time.monotonic() - t

    t = stage(f"[seed {seed}] online GRPO through the agent loop on the {len(train_tasks)} training tasks")
    merged = root / "sft-merged"  # GRPO trains a new adapter on the SFT model (train/grpo-toy.yaml says why)
    if not (merged / "config.json").is_file():
        merge_adapter(sft_adapter, merged)
    grpo_out = root / "grpo"
    recipe = load_recipe("grpo-toy", [f"model.base={merged}", f"seed={seed}",
                                      f"output_dir={grpo_out}", f"rollout.store={root / 'rollouts'}",
                                      *([f"trainer.max_steps={args.grpo_steps}"] if args.grpo_steps else []),
                                      f"rollout.workers={args.workers}",
                                      *args.grpo_set])
    grpo_adapter = grpo.run(recipe, tasks=train_tasks)
    history = [json.loads(line) for line in (grpo_out / "metrics.jsonl").read_text().splitlines()]
    steps = first_per_step(h for h in history if h.get("event") == "rollouts")  # refill rounds: dynamic_sampling
    refills = {h["step"]: h for h in history if h.get("event") == "dynamic_sampling"}
    print("   step  mean reward  rollouts  masked  uniform groups  refilled  seconds")
    for entry in steps:
        refilled = refills.get(entry["step"], {}).get("replaced_groups", 0)
        print(f"   {entry['step']:>4}  {entry['reward_mean']:>11.3f}  {entry['rollouts']:>8}  {entry['masked']:>6}"
              f"  {entry['uniform_groups']:>7}/{entry['groups']:<6}  {refilled:>8}  {entry['seconds']:>7.1f}", flush=True)
    timings["grpo"] = time.monotonic() - t

    t = stage(f"[seed {seed}] held-out tasks: {args.eval_rollouts} fresh rollouts per task, SFT vs GRPO")
    before = evaluate(sft_adapter, base, held_out, args.eval_rollouts, root / "eval-sft", args.workers, seed)
    after = evaluate(grpo_adapter, base, held_out, args.eval_rollouts, root / "eval-grpo", args.workers, seed)
    timings["eval"] = time.monotonic() - t
    probes = {arm: choice_probabilities(arm_base, adapter, demos, held_out)
              for arm, arm_base, adapter in (("sft", base, sft_adapter), ("grpo", merged, grpo_adapter))}
    ratio = after["mean"] / before["mean"] if before["mean"] else float("inf")
    print(f"   SFT baseline: {before['mean']:.3f} over {before['rollouts']} rollouts; "
          f"GRPO: {after['mean']:.3f} over {after['rollouts']}; ratio {ratio:.2f}x", flush=True)
    result = {"seed": seed, "sft_held_out": before, "grpo_held_out": after, "ratio": ratio, "probes": probes,
            "curve": [{"step": e["step"], "reward_mean": round(e["reward_mean"], 4), "masked": e["masked"],
                       "uniform_groups": e["uniform_groups"], "groups": e["groups"],
                       "refilled_groups": refills.get(e["step"], {}).get("replaced_groups", 0),
                       "seconds": e["seconds"]} for e in steps],
            "grpo_set": list(args.grpo_set),
            "timings": {k: round(v, 1) for k, v in timings.items()},
            "seconds": round(time.monotonic() - started, 1), "load_start": load_start, "load_end": load_average()}
    done.write_text(json.dumps(result, indent=1))
    return result


def first_per_step(entries) -> list[dict]:
    """The first generation round of each step (the batch as sampled; dynamic sampling adds refill rounds)."""
    seen: dict[int, dict] = {}
    for entry in entries:
        seen.setdefault(entry["step"], entry)
    return list(seen.values())


def markdown(report: dict) -> str:
    seeds = report["seeds"]
    lines = ["# GRPO learns? The honest toy benchmark (bench/grpo_learns.py)", "",
             f"Produced by `{report['command']}` on {report['date']} ({report['host']}). "
             "CPU only; the 2-core box was shared with other jobs: the load average (1, 5, 15 min) is recorded "
             "at each seed's start and end.", "",
             f"Family `verbs` (evals/toy/verbs.yaml): {report['train_tasks']} training tasks, "
             f"{report['held_out_tasks']} held-out tasks with module/function names never seen in training. "
             f"Answering the same edit every time scores {report['constant_policy']} on the held-out tasks. "
             f"Demonstrations (shared by the seeds): {report['demos']['count']}, {report['demos']['right']} right, "
             f"recorded in {report['demos']['seconds']:.0f}s.", "",
             f"Both arms sampled at temperature {seeds[0]['sft_held_out']['temperature'] if seeds else '?'}, "
             f"{report['eval_rollouts']} rollouts per held-out task each. Aim: GRPO held-out >= {AIM_HELD_OUT} "
             f"and >= {AIM_RATIO}x the SFT baseline.", "",
             "| seed | SFT held-out | GRPO held-out | ratio | aim met | seconds (model+SFT+GRPO+eval) | load at start / end |",
             "|---|---|---|---|---|---|---|"]
    for s in seeds:
        met = s["grpo_held_out"]["mean"] >= AIM_HELD_OUT and s["ratio"] >= AIM_RATIO
        lines.append(f"| {s['seed']} | {s['sft_held_out']['mean']:.3f} | {s['grpo_held_out']['mean']:.3f} | "
                     f"{s['ratio']:.2f}x | {'yes' if met else 'no'} | {s['seconds']:.0f} "
                     f"({' + '.join(f'{v:.0f}' for v in s['timings'].values())}) | {s['load_start']} / {s['load_end']} |")
    if seeds:
        mean = lambda key: sum(s[key]["mean"] for s in seeds) / len(seeds)  # noqa: E731
        lines += ["", f"Mean over {len(seeds)} seed(s): SFT {mean('sft_held_out'):.3f}, GRPO {mean('grpo_held_out'):.3f}."]
    probed = [s for s in seeds if s.get("probes")]
    if probed:
        lines += ["", "## What the policies read (held-out tasks, no sampling)", "",
                  "P(verb): probability that the policy restates the issue's verb (among the four); P(edit | verb): "
                  "probability of the right edit once the right verb is written (among the four). 0.25 is chance.", "",
                  "| seed | SFT P(verb) | SFT P(edit given verb) | GRPO P(verb) | GRPO P(edit given verb) |",
                  "|---|---|---|---|---|"]
        for s in probed:
            sft, grpo = s["probes"]["sft"], s["probes"]["grpo"]
            lines.append(f"| {s['seed']} | {sft['verb']:.3f} | {sft['edit_given_verb']:.3f} | {grpo['verb']:.3f} | "
                         f"{grpo['edit_given_verb']:.3f} |")
    lines += ["", "## Training reward per GRPO step (mean over the step's rollouts as first sampled, training tasks)",
              ""]
    for s in seeds:
        curve = " ".join(f"{e['reward_mean']:.2f}" for e in s["curve"])
        refilled = sum(e.get("refilled_groups", 0) for e in s["curve"])
        lines.append(f"- seed {s['seed']}: {curve}" + (f" (groups refilled by dynamic sampling: {refilled})"
                                                       if refilled else ""))
    lines += ["", "## Held-out reward per task", "", "| seed | arm | " + " | ".join(report["held_out_ids"]) + " |",
              "|---|---|" + "---|" * len(report["held_out_ids"])]
    for s in seeds:
        for arm in ("sft_held_out", "grpo_held_out"):
            cells = " | ".join(f"{s[arm]['per_task'].get(i, float('nan')):.2f}" for i in report["held_out_ids"])
            lines.append(f"| {s['seed']} | {arm.split('_')[0].upper()} | {cells} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--grpo-steps", type=int, default=None, help="default: the recipe's trainer.max_steps")
    parser.add_argument("--eval-rollouts", type=int, default=2, help="fresh rollouts per held-out task, each arm")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--grpo-set", nargs="*", default=[], help="extra key=value overrides of grpo-toy")
    parser.add_argument("--sft-set", nargs="*", default=[], help="extra key=value overrides of sft-toy")
    parser.add_argument("--work", type=Path, default=None, help="working directory (default: a temporary one)")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results" / "grpo_learns.md")
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    parser.add_argument("--probe-only", action="store_true",
                        help="only add the choice probabilities to the seeds of an existing --work report")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # unwind: sandboxes removed

    import logging
    import warnings

    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    warnings.filterwarnings("ignore")
    import torch

    torch.set_num_threads(1)
    from codeagent.data.toy import family, verbs_tasks
    from codeagent.train.toy import VERBS_EDIT, balanced_operators, record_demonstrations
    from codeagent.trajectory.store import TrajectoryStore

    work = args.work or Path(tempfile.mkdtemp(prefix="grpo-learns-"))
    work.mkdir(parents=True, exist_ok=True)
    train_tasks, held_out = verbs_tasks("train"), verbs_tasks("held_out")
    constant = constant_policy_scores(held_out)
    print(f"{len(train_tasks)} training tasks, {len(held_out)} held-out tasks; the same edit every time scores "
          f"{constant} on the held-out tasks")
    report = {"command": "python bench/grpo_learns.py " + " ".join(sys.argv[1:]),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "host": f"{os.cpu_count()} CPUs", "train_tasks": len(train_tasks), "held_out_tasks": len(held_out),
              "held_out_ids": [task.instance_id for task in held_out], "constant_policy": constant,
              "eval_rollouts": args.eval_rollouts, "seeds": []}
    if args.probe_only:
        report = json.loads((args.work / "report.json").read_text())
        for entry in report["seeds"]:
            root = args.work / f"seed-{entry['seed']}"
            entry["probes"] = {arm: choice_probabilities(root / arm_base, root / arm / "adapter", args.work / "demos",
                                                         held_out) for arm, arm_base in (("sft", "toy-model"), ("grpo", "sft-merged"))}
        (args.work / "report.json").write_text(json.dumps(report, indent=2))
        args.results.write_text(markdown(report))
        print(markdown(report))
        return
    try:
        t = stage(f"noisy demonstrations (one per training task, {len(train_tasks)}) in Docker, graded")
        demos = work / "demos"
        if not demos.is_dir():
            record_demonstrations(demos, balanced_operators(train_tasks, family("verbs")["candidates"]),
                                  tasks=train_tasks, command=VERBS_EDIT, workers=args.workers)
        graded = [trajectory.resolved for trajectory in TrajectoryStore(demos).iter()]
        report["demos"] = {"count": len(graded), "right": sum(graded), "seconds": time.monotonic() - t}
        print(f"   {len(graded)} demonstrations, {sum(graded)} right")
        for seed in args.seeds:
            report["seeds"].append(run_seed(seed, args, work, demos, train_tasks, held_out))
            (work / "report.json").write_text(json.dumps(report, indent=2))
            args.results.parent.mkdir(parents=True, exist_ok=True)
            args.results.write_text(markdown(report))
        print("\n" + markdown(report))
        print(f"results: {args.results}; report: {work / 'report.json'}")
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
