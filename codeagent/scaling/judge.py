"""The execution-free verifier: a model reads the issue and a candidate patch and answers YES/NO.

The score is P(YES): from the log-probability of the answer when the backend gives log-probs and
the reply starts with the answer (its first token; P(YES) = p for YES, 1 - p for NO), else parsed
from the text (an explicit "score: 0.8", or YES/NO). An unreadable answer scores 0.5 and says so.
"""

from __future__ import annotations

import math
import re

from ..agent.prompts import render
from ..models import Model, ModelError, Sampling
from ..tools.text import truncate_middle
from .types import Candidate

PATCH_CHARS = 12_000
_SCORE = re.compile(r"score\s*[:=]\s*([01](?:\.\d+)?)", re.IGNORECASE)
_ANSWER = re.compile(r"\b(YES|NO)\b")


def judge_score(text: str, logprobs: list[float] | None) -> tuple[float, str]:
    """(P(YES), how it was read) from a judge's reply."""
    explicit = _SCORE.search(text)
    answer = _ANSWER.search(text.upper())
    if answer and logprobs and not text[:answer.start()].strip():
        probability = min(max(math.exp(logprobs[0]), 0.0), 1.0)
        return (probability if answer.group(1) == "YES" else 1.0 - probability), "logprobs"
    if explicit:
        return min(max(float(explicit.group(1)), 0.0), 1.0), "score in the text"
    if answer:
        return (1.0 if answer.group(1) == "YES" else 0.0), "answer in the text"
    return 0.5, "no answer found in the reply"


def judge(model: Model, issue: str, candidates: list[Candidate], *, prompts_dir: str | None = None) -> None:
    """Score each usable candidate in place: scores["judge"], details["judge"]."""
    for candidate in candidates:
        if not candidate.usable:
            continue
        prompt = render("judge", prompts_dir, issue=issue.strip(), patch=truncate_middle(candidate.patch, PATCH_CHARS))
        try:
            reply = model.complete([{"role": "user", "content": prompt}], [], Sampling(temperature=0.0, max_tokens=16))
        except ModelError as exc:
            candidate.details["judge"] = f"the judge failed: {exc}"
            continue
        score, how = judge_score(reply.content, reply.logprobs)
        candidate.scores["judge"] = round(score, 4)
        candidate.details["judge"] = f"{reply.content.strip()[:200]!r} ({how})"
