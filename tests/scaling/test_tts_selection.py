"""The pieces of test-time scaling that need no sandbox: the tournament (knock-out, seeding, the judge's
word, positions alternated), offline selection with a judge model, the search's UCT choice, values and
agreement."""

from __future__ import annotations

import json

from click.testing import CliRunner

import codeagent.models as models
from codeagent.cli.eval_commands import select_command
from codeagent.models import ScriptedModel
from codeagent.scaling.methods import agreement, choosable, values
from codeagent.scaling.offline import write_candidates
from codeagent.scaling.search import Node, pick
from codeagent.scaling.selection import select
from codeagent.scaling.tournament import ModelPairJudge, read_preference
from codeagent.scaling.types import Candidate


def patch(op: str) -> str:
    return (f"diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n def f(a, b):\n-    return a % b\n"
            f"+    return a {op} b\n")


def pool(*ops: str, **scores) -> list[Candidate]:
    return [Candidate(instance_id="t", index=i, patch=patch(op) if op else "", scores=dict(scores))
            for i, op in enumerate(ops)]


class Prefers:
    """A judge that prefers the summary showing `op`; undecided when neither or both do."""

    def __init__(self, op: str):
        self.op, self.shown = op, []

    def prefer(self, issue, first, second):
        self.shown.append((first, second))
        a, b = f"a {self.op} b" in first, f"a {self.op} b" in second
        return (0 if a else 1, "picked") if a != b else (None, "undecided")


def test_knockout_seeds_by_the_hybrid_order_and_the_judge_decides():
    candidates = pool("+", "-", "+", "*", "//", "+")  # "+" has three votes: the first seed
    judge = Prefers("*")
    selection = select(candidates, "tournament", pair_judge=judge, issue="f must multiply")
    assert selection.chosen == 3 and selection.ranking[0] == 3
    assert sorted(selection.ranking) == list(range(6))  # every candidate ranked, copies after their entrant
    assert selection.ranking.index(2) == selection.ranking.index(0) + 1
    assert len(selection.matches) == 3  # four distinct patches: two rounds
    first_round = selection.matches[:2]
    assert {m["first"] for m in first_round} | {m["second"] for m in first_round} == {0, 1, 3, 4}
    assert "3 candidate(s) wrote this same change" in "".join(a + b for a, b in judge.shown)  # votes in summaries
    assert "won the knock-out of 4 distinct patches" in selection.why


def test_positions_alternate_so_a_judge_always_saying_a_favours_no_seed():
    class SaysA:
        def prefer(self, issue, first, second):
            return 0, "A"

    selection = select(pool("+", "-", "*", "//"), "tournament", pair_judge=SaysA())
    firsts = [match["first"] == match["winner"] for match in selection.matches]
    assert all(firsts)  # it always picked the one shown first...
    seeds = [(m["first"], m["second"]) for m in selection.matches[:2]]
    assert seeds[0][0] < seeds[0][1] and seeds[1][0] > seeds[1][1]  # ...which was the better seed once, the worse once


def test_without_a_judge_the_tournament_is_the_hybrid_order():
    candidates = pool("+", "-", "*", regression=1.0)
    candidates[1].scores["regression"] = 0.5
    assert select(candidates, "tournament").chosen == select(candidates, "hybrid").chosen == 0
    assert select(pool("", ""), "tournament").chosen is None  # nothing usable: no match at all


def test_model_judge_reads_a_or_b_and_gives_up_on_anything_else():
    assert read_preference("B") == (1, "the judge answered B")
    assert read_preference("  A, because") == (0, "the judge answered A")
    assert read_preference("I cannot tell")[0] is None  # a lower-case article is no answer
    model = ScriptedModel([{"role": "assistant", "content": "B"}, {"role": "assistant", "content": "<tool_call>"}])
    judge = ModelPairJudge(model)
    assert judge.prefer("the issue", "first summary", "second summary") == (1, "the judge answered B")
    assert judge.prefer("the issue", "x", "y")[0] is None
    prompt = model.calls[0][0]["content"]
    assert "the issue" in prompt and "first summary" in prompt and "Answer with one letter, A or B" in prompt


def test_offline_selection_with_a_judge_model(tmp_path, monkeypatch):
    """`eval select --policy tournament --judge-model SPEC --dataset FILE`: the judge reads each instance's issue."""
    groups = {"t": pool("+", "*", "-")}
    for candidate in groups["t"]:
        candidate.resolved = " * " in candidate.patch
    path = tmp_path / "candidates.jsonl"
    write_candidates(path, groups)
    dataset = tmp_path / "tasks.jsonl"
    dataset.write_text(json.dumps({"instance_id": "t", "repo": "o/r", "base_commit": "abc", "problem_statement":
                                   "f must multiply", "patch": "", "test_patch": "", "FAIL_TO_PASS": "[]",
                                   "PASS_TO_PASS": "[]"}) + "\n")
    monkeypatch.setitem(models.BACKENDS, "judge", "tests.scaling.test_tts_selection:multiplying_judge")
    out = tmp_path / "out.json"
    result = CliRunner().invoke(select_command, ["--candidates", str(path), "--policy", "hybrid", "--policy",
                                                 "tournament", "--judge-model", "judge:x", "--dataset", str(dataset),
                                                 "--json", str(out)])
    assert result.exit_code == 0, result.output
    numbers = json.loads(out.read_text())["policies"]
    assert numbers["tournament"]["best_at_n"] == 1 and numbers["hybrid"]["best_at_n"] == 0
    assert numbers["tournament"]["of_gap"] == 1.0 and "of the gap" in result.output


def multiplying_judge(spec, **options) -> ScriptedModel:
    """A judge model (registered as `judge:` by the test) that reads the issue and picks the multiplication."""
    def answer(messages):
        text = messages[-1]["content"]
        assert "f must multiply" in text
        first = text.split('<solution name="B">')[0]
        return {"role": "assistant", "content": "A" if "a * b" in first else "B" if "a * b" in text else "A"}

    return ScriptedModel([answer] * 20)


def test_values_votes_and_agreement_leave_out_resubmissions():
    candidates = pool("+", "+", "-", "", regression=1.0)
    candidates[1].details["inherited"] = True  # a branch that only resubmitted its start
    worth = values(candidates)
    assert worth[0] == worth[1] == worth[2] == (1.0 + 0.5) / 2 and worth[3] == 0.0  # "+" has one vote of two
    assert agreement(candidates, 2) == "" and "2 independent" in agreement(pool("+", "+", regression=1.0), 2)
    assert agreement(pool("+", "+", regression=0.5), 2) == ""  # they agree, but break tests
    assert [c.index for c in choosable(candidates)] == [0, 2, 3]


def test_uct_prefers_promising_unvisited_states_and_never_a_closed_one():
    root = Node(0, leaves=[0, 1])
    good = Node(1, parent=root, leaves=[1])
    bad = Node(2, parent=root, leaves=[0])
    nodes = [root, good, bad]
    worth = {0: 0.2, 1: 0.9}
    assert pick(nodes, worth, 1.0) is good
    assert pick(nodes, worth, 0.0) is good  # greedy: the best value
    good.closed = True
    assert pick(nodes, worth, 0.0) is root  # root's mean 0.55 beats the bad state's 0.2
    good.closed = bad.closed = True
    root.pending = 5
    assert pick(nodes, worth, 1.0) is root  # the root is always open
