"""Selection policies on constructed candidate sets."""

from __future__ import annotations

import pytest

from codeagent.scaling.selection import POLICIES, SelectionError, select
from codeagent.scaling.types import Candidate
from tests.support.calc_edits import FIX, FIX_COMMENTED, FIX_REFORMATTED, MUL_CHANGE, OTHER_FIX, diff, read


def cand(index: int, key: str | None = None, *, patch: str = "some patch", discarded: str | None = None,
         **scores: float) -> Candidate:
    details = {}
    if key:
        details["normalized"] = key
    if discarded:
        details["discarded"] = discarded
    return Candidate(instance_id="t", index=index, patch=patch, scores=scores, details=details)


def test_vote_picks_the_largest_class_and_breaks_ties_stably():
    pool = [cand(0, "a"), cand(1, "b"), cand(2, "b"), cand(3, "c"), cand(4, "b")]
    chosen = select(pool, "vote")
    assert chosen.chosen == 1 and chosen.votes == {0: 1, 1: 3, 2: 3, 3: 1, 4: 3}
    assert chosen.ranking[:3] == [1, 2, 4] and sorted(chosen.ranking) == [0, 1, 2, 3, 4]
    assert "3" in chosen.why and "candidate 1" in chosen.why
    tie = select([cand(0, "x"), cand(1, "y"), cand(2, "y"), cand(3, "x")], "vote")
    assert tie.chosen == 0 and "sampled first" in tie.why and "votes, similarity" in tie.why  # both classes have 2: the one seen first wins
    assert select(list(reversed([cand(0, "x"), cand(1, "y"), cand(2, "y"), cand(3, "x")])), "vote").chosen == 0


def test_votes_from_real_normalization():
    pool = [Candidate(instance_id="t", index=i, patch=p) for i, p in enumerate(
        [diff("calc.py", OTHER_FIX), diff("calc.py", FIX), "", diff("calc.py", FIX_COMMENTED),
         diff("calc.py", FIX_REFORMATTED)])]
    selection = select(pool, "vote", read=read)
    assert selection.chosen == 1 and selection.votes[1] == 3 and 2 not in selection.votes
    assert selection.ranking[-1] == 2  # the empty patch last
    assert all(not c.details for c in pool)  # the caller's candidates are untouched


def test_soft_votes_break_ties_between_singletons():
    """No two patches are equivalent; the two that change add() alike outweigh the lone one."""
    plus_zero = FIX.replace("return a + b", "return a + b + 0")
    pool = [Candidate(instance_id="t", index=i, patch=diff("calc.py", text))
            for i, text in enumerate([MUL_CHANGE, plus_zero, FIX])]
    selection = select(pool, "vote", read=read)
    assert set(selection.votes.values()) == {1}
    assert selection.chosen == 2 and selection.ranking == [2, 1, 0]
    assert "similarity" in selection.why and "candidate 1" in selection.why
    assert select(pool, "vote", read=read, soft_votes=False).chosen == 0  # exact votes only: the first wins
    assert select(pool, "tests", read=read).chosen == 2
    same = [Candidate(instance_id="t", index=i, patch=diff("calc.py", text)) for i, text in enumerate([OTHER_FIX, FIX])]
    assert "sampled first" in select(same, "vote", read=read).why  # equally similar: the first


def test_discarded_candidates_are_never_chosen_when_a_usable_one_exists():
    pool = [cand(0, "a", discarded="does not apply", judge=1.0, regression=1.0),
            cand(1, "a", discarded="does not apply", judge=1.0, regression=1.0),
            cand(2, "b", judge=0.1, regression=0.2), cand(3, "c", patch="  \n", judge=1.0)]
    for policy in POLICIES:
        selection = select(pool, policy, seed=7)
        assert selection.chosen == 2, policy
        assert set(selection.ranking[1:]) == {0, 1, 3}
    nothing = select([cand(0, discarded="does not apply"), cand(1, patch="")], "hybrid")
    assert nothing.chosen is None and "no usable candidate" in nothing.why and nothing.ranking == [0, 1]


def test_judge_policy_and_missing_judge():
    pool = [cand(0, "a", judge=0.4), cand(1, "b", judge=0.9), cand(2, "a", judge=0.4), cand(3, "c", judge=0.9)]
    selection = select(pool, "judge")
    assert selection.chosen == 1 and "judge" in selection.why
    partly = [cand(0, "a"), cand(1, "b", judge=0.2)]  # a candidate the judge did not score ranks below
    assert select(partly, "judge").chosen == 1
    unjudged = select([cand(0, "a"), cand(1, "b"), cand(2, "b")], "judge")
    assert unjudged.chosen == 1 and "judge did not run" in unjudged.why


def test_tests_policy_orders_regression_then_reproduction_then_votes():
    pool = [cand(0, "a", regression=0.9, reproduction=1.0), cand(1, "b", regression=1.0, reproduction=0.0),
            cand(2, "c", regression=1.0, reproduction=0.5), cand(3, "c", regression=1.0, reproduction=0.5),
            cand(4, "d", regression=1.0, reproduction=0.5)]
    selection = select(pool, "tests")
    assert selection.chosen == 2 and selection.ranking[:3] == [2, 3, 4]
    assert "votes" in selection.why and "tie on regression, reproduction" in selection.why
    only_regression = select([cand(0, "a", regression=0.5), cand(1, "b", regression=1.0)], "tests")
    assert only_regression.chosen == 1 and "reproduction did not run" in only_regression.why


def test_hybrid_picks_right_where_votes_pick_wrong():
    """Three copies of a patch that breaks existing tests outvote the right one; hybrid does not."""
    wrong = [cand(i, "wrong", judge=0.7, regression=0.6, reproduction=1.0) for i in range(3)]
    right = cand(3, "right", judge=0.8, regression=1.0, reproduction=1.0)
    pool = [*wrong, right, cand(4, "other", judge=0.1, regression=1.0, reproduction=0.0)]
    assert select(pool, "vote").chosen == 0
    hybrid = select(pool, "hybrid", top_k=3)
    assert hybrid.chosen == 3
    assert "regression" in hybrid.why and "top 3" in hybrid.why
    assert hybrid.ranking[0] == 3 and 4 in hybrid.ranking[3:]  # outside the judge's top 3: after it


def test_hybrid_top_k_shortlists_by_judge():
    pool = [cand(0, "a", judge=0.9, regression=0.5), cand(1, "b", judge=0.8, regression=0.7),
            cand(2, "c", judge=0.1, regression=1.0)]
    assert select(pool, "hybrid", top_k=2).chosen == 1  # the best regression score is not shortlisted
    assert select(pool, "hybrid", top_k=None).chosen == 2
    assert select(pool, "hybrid", top_k=2, stages=["judge"]).chosen == 0
    with pytest.raises(SelectionError):
        select(pool, "hybrid", stages=["votes-of-the-moon"])


def test_hybrid_falls_back_to_the_verifiers_present():
    no_judge = [cand(0, "a", regression=0.5), cand(1, "b", regression=1.0), cand(2, "a", regression=0.5)]
    selection = select(no_judge, "hybrid")
    assert selection.chosen == 1 and "judge did not run" in selection.why and "reproduction" in selection.why
    nothing = [cand(0, "a"), cand(1, "b"), cand(2, "b")]
    assert select(nothing, "hybrid").chosen == 1  # only votes are left
    missing_one = [cand(0, "a", regression=1.0), cand(1, "b"), cand(2, "b", regression=0.0)]
    assert select(missing_one, "hybrid").ranking == [0, 2, 1]  # no score ranks below a real 0


def test_random_is_seeded_and_only_draws_usable():
    pool = [cand(i, str(i)) for i in range(8)] + [cand(8, discarded="does not apply")]
    first = select(pool, "random", seed=1)
    assert first.chosen == select(pool, "random", seed=1).chosen
    assert first.ranking[-1] == 8 and "random" in first.why
    assert len({select(pool, "random", seed=s).chosen for s in range(20)}) > 2


def test_errors():
    with pytest.raises(SelectionError):
        select([cand(0)], "best")
    with pytest.raises(SelectionError):
        select([cand(0), cand(0)], "vote")
    only = select([cand(5, "a")], "hybrid")
    assert only.chosen == 5 and "only usable" in only.why
