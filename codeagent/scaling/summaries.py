"""What a candidate did and what the verifiers said of it, in a few lines: the feedback evolution shows the
next round (prompts/evolve.j2) and the summary a tournament's judge reads (prompts/tournament.j2).

Summaries are written from the record (no model call, no tokens): the exit status, what the patch
changes, each verifier's verdict, how many other candidates wrote the same patch, and the agent's own
last words; the patch itself is shown beside them, cut in the middle when long.
"""

from __future__ import annotations

from ..tools.text import truncate_middle
from .types import Candidate

PATCH_CHARS = 6_000


def feedback(candidate: Candidate, votes: int | None = None) -> list[str]:
    """One line per verdict the verifiers gave (and the votes, when given)."""
    lines = []
    scores, details = candidate.scores, candidate.details
    if "regression" in scores:
        report = details.get("regression") or {}
        broken = report.get("broken") if isinstance(report, dict) else None
        if scores["regression"] >= 1.0:
            lines.append("existing tests: none broken")
        else:
            names = ", ".join(str(item.get("test") if isinstance(item, dict) else item) for item in (broken or [])[:8])
            lines.append(f"existing tests: {1 - scores['regression']:.0%} of them broken" + (f" ({names})" if names else ""))
    if "reproduction" in scores:
        lines.append("reproduction test: " + ("passes" if scores["reproduction"] >= 1.0 else
                                              f"still fails ({str(details.get('reproduction', ''))[:200]})"))
    if "judge" in scores:
        lines.append(f"reviewer's confidence that it resolves the issue: {scores['judge']:.2f}")
    if votes is not None:
        lines.append(f"{votes} candidate(s) wrote this same change" if votes > 1 else "no other candidate wrote this change")
    if details.get("discarded"):
        lines.append(f"discarded: {details['discarded']}")
    return lines


def diff_stat(patch: str) -> str:
    files, added, removed = [], 0, 0
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            files.append(line.split(" b/", 1)[-1])
        elif line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return f"{len(files)} file(s) changed ({', '.join(files[:6])}), +{added} -{removed} lines" if files else "no change"


def summary(candidate: Candidate, votes: int | None = None, *, patch_chars: int = PATCH_CHARS) -> str:
    """The candidate as a judge reads it: status, change, verdicts, the agent's account, the patch."""
    lines = [f"run ended: {candidate.exit_status or 'unknown'}; {diff_stat(candidate.patch)}"]
    lines += feedback(candidate, votes)
    account = str(candidate.details.get("account") or "").strip()
    if account:
        lines.append(f"the agent's last words: {account[:400]}")
    return "\n".join(lines) + "\n\n" + truncate_middle(candidate.patch, patch_chars)
