"""The honest learning family (evals/toy/verbs.yaml, bench/grpo_learns.py): the right edit depends on
the issue's verb; held-out tasks use names never seen in training; demonstrations are graded in Docker."""

from __future__ import annotations

import json
import re

import pytest


def test_held_out_tasks_use_unseen_names_and_no_single_edit_fits_them():
    from codeagent.data.toy import verbs_tasks

    train, held = verbs_tasks("train"), verbs_tasks("held_out")
    assert len(train) == 192 and len(held) == 32
    assert len({t.instance_id for t in train + held}) == 224
    names = lambda tasks: {re.match(r"(\w+)\(", t.problem_statement).group(1) for t in tasks}  # noqa: E731
    assert not names(train) & names(held)
    seen_text = " ".join(t.problem_statement + t.gold_patch for t in train)
    assert not any(name in seen_text for name in names(held))
    for tasks in (train, held):  # answering the same edit every time scores a quarter
        ops = [t.toy_operator for t in tasks]
        assert {op: ops.count(op) / len(ops) for op in ops} == {"+": 0.25, "-": 0.25, "*": 0.25, "//": 0.25}
    verbs = {"+": "add", "-": "subtract", "*": "multiply", "//": "floor-divide"}
    assert all(f" must {verbs[t.toy_operator]} its" in t.problem_statement for t in train + held)


def test_the_toy_tokenizer_keeps_the_issue_verb_one_token_in_every_task():
    """Defect: the toy tokenizer merged across word boundaries, so `add` was `e must add ` in one task
    and `must add ` in another: the word a policy must read was a different token in every task and
    nothing learned on the training tasks could carry over. With word boundaries it is one token."""
    from codeagent.data.toy import verbs_tasks
    from codeagent.train.tiny import build_tokenizer
    from codeagent.train.toy import toy_corpus

    tasks = verbs_tasks()
    corpus = toy_corpus() + [t.problem_statement for t in verbs_tasks("train") for _ in range(8)]

    def verb_tokens(tokenizer, task):
        pieces = [tokenizer.decode([i]) for i in tokenizer(task.problem_statement)["input_ids"]]
        return [p for p in pieces if any(v in p for v in ("add", "subtract", "multiply", "divide"))]

    merged = build_tokenizer(corpus, vocab_size=2048, word_boundaries=False)
    assert len({tuple(verb_tokens(merged, t)) for t in tasks if t.toy_operator == "+"}) > 1
    words = build_tokenizer(corpus, vocab_size=2048, word_boundaries=True)
    for op in ("+", "-", "*"):
        assert len({tuple(verb_tokens(words, t)) for t in tasks if t.toy_operator == op}) == 1


def test_the_toy_grpo_recipe_trains_on_several_tasks_per_step():
    """Defect: grpo-toy.yaml had batch 8 = num_generations 8, one task per optimizer step: on a family
    whose answer depends on the task, each step pulled every prompt toward the last task's answer and
    the policy collapsed to one edit. Every step now sees several tasks (one group each)."""
    from codeagent.train.recipe import load_recipe

    trainer = load_recipe("grpo-toy").trainer
    assert trainer["per_device_train_batch_size"] // trainer["num_generations"] >= 4


def test_verbs_demonstrations_are_graded_by_the_hidden_tests(tmp_path, no_leaks):
    from codeagent.data.toy import verbs_tasks
    from codeagent.train.toy import VERBS_EDIT, record_demonstrations
    from codeagent.trajectory.store import TrajectoryStore

    task = next(t for t in verbs_tasks("held_out") if t.instance_id == "verbs-deal")  # deal(26, 4) must floor-divide: 6
    ids = record_demonstrations(tmp_path, {task.instance_id: ["//", "-"]}, tasks=[task], command=VERBS_EDIT,
                                workers=2)
    store = TrajectoryStore(tmp_path)
    runs = [store.load(i) for i in ids]
    assert [r.resolved for r in runs] == [True, False]
    assert "-    return a % b\n+    return a // b" in runs[0].patch and "dealer.py" in runs[0].patch
    assert json.loads(runs[1].messages[2]["tool_calls"][0]["function"]["arguments"])["command"] == \
        'set -- floor-divide=-; sed -i "s|%|${1#*=}|" *.py'
    assert "-    return a % b\n+    return a - b" in runs[1].patch


def test_balanced_demonstrations_tell_nothing_about_the_right_edit():
    """One demonstration per training task, every (right operator, demonstrated edit) pair equally
    often: SFT on them learns the format and to restate the verb, and the edit stays a coin toss."""
    from collections import Counter

    from codeagent.data.toy import family, verbs_tasks
    from codeagent.train.toy import balanced_operators

    tasks = verbs_tasks("train")
    chosen = balanced_operators(tasks, family("verbs")["candidates"])
    assert set(chosen) == {t.instance_id for t in tasks} and all(len(ops) == 1 for ops in chosen.values())
    pairs = Counter((t.toy_operator, chosen[t.instance_id][0]) for t in tasks)
    assert len(pairs) == 16 and set(pairs.values()) == {len(tasks) // 16}


@pytest.mark.parametrize("split", ["train", "held_out"])
def test_every_verbs_task_has_one_right_edit(split):
    from codeagent.data.toy import OPERATORS, family, verbs_tasks

    for task in verbs_tasks(split):
        a, b = map(int, re.search(r"\((\d+), (\d+)\)", task.problem_statement).groups())
        right = int(re.search(r"must return (-?\d+)", task.problem_statement).group(1))
        assert [op for op in family("verbs")["candidates"] if OPERATORS[op](a, b) == right] == [task.toy_operator]
