"""Consensus among candidates' regression runs: a test that most candidates break is behaviour the
fix is meant to change (an existing test asserting the old behaviour), not a regression."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .types import Candidate

CONSENSUS = 0.5  # the share of runs above which a broken test is taken as an expected change


def _broken_ids(report: dict[str, Any]) -> list[str] | None:
    """The tests a run broke, or None when the run gave no per-test results (timeout, no apply...)."""
    if report.get("score") is None or "broken_count" not in report \
            or report.get("outcome") not in ("resolved", "unresolved"):
        return None
    return [item["test"] if isinstance(item, dict) else item for item in report["broken"]]


def expected_changes(broken_lists: Sequence[list[str]], total: int, threshold: float = CONSENSUS) -> set[str]:
    """Tests that more than `threshold` of the runs broke (two at least): behaviour the fix is meant
    to change. When that would be every relevant test, nothing is (everything broke for most)."""
    if len(broken_lists) < 2:
        return set()
    tally: dict[str, int] = {}
    for broken in broken_lists:
        for test in set(broken):
            tally[test] = tally.get(test, 0) + 1
    expected = {test for test, count in tally.items() if count >= 2 and count / len(broken_lists) > threshold}
    return expected if len(expected) < total else set()


def apply_consensus(candidates: Sequence[Candidate], threshold: float = CONSENSUS) -> set[str]:
    """Leave the tests most candidates break out of every candidate's regression score (in place):
    `details["regression"]` gets `raw_score` and `expected_changes`. Each usable candidate counts
    (equivalent ones too: votes). Returns the tests left out."""
    scored = [c for c in candidates if c.usable and _broken_ids(c.details.get("regression") or {}) is not None]
    totals = {c.details["regression"].get("total") for c in scored}
    if len(totals) != 1:
        return set()
    total = int(totals.pop() or 0)
    expected = expected_changes([ids for c in scored if (ids := _broken_ids(c.details["regression"])) is not None],
                                total, threshold)
    if not expected:
        return expected
    kept = total - len(expected)
    for candidate in scored:
        report = candidate.details["regression"]
        listed = set(_broken_ids(report) or ())  # never None: `scored` has per-test results
        broken = max(len(listed - expected), int(report.get("broken_count") or 0) - len(listed & expected))
        report.setdefault("raw_score", report["score"])
        report["score"] = round(1 - broken / kept, 4) if kept else 1.0
        report["expected_changes"] = sorted(expected)
        candidate.scores["regression"] = float(report["score"])
    return expected
