"""The test-time scaling flags that `solve` and `eval run` share: --tts, --select, --budget-tokens (the
choices are the config's: tests/run/test_tts_cli.py holds them equal; written out here so that --help stays
instant)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

TTS_METHODS = ("sample", "evolve", "search")
SELECTION_POLICIES = ("hybrid", "vote", "judge", "tests", "random", "tournament")


def scaling_options(command: Callable) -> Callable:
    options = [
        click.option("--tts", type=click.Choice(TTS_METHODS), help="How candidates come about: sampled side by side "
                     "(best-of-N), evolved in rounds on the best so far and their verifier feedback, or grown as a "
                     "search tree over trajectories; config scaling.tts."),
        click.option("--select", "select_policy", type=click.Choice(SELECTION_POLICIES),
                     help="How one candidate is chosen (tournament: a knock-out of pairwise judgements of each "
                          "candidate's summary); config scaling.policy."),
        click.option("--budget-tokens", type=click.IntRange(min=1), help="The budget every method shares: tokens "
                     "the model generates in all (runs, judges); default: --candidates runs."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def scaling_overrides(tts: str | None, select_policy: str | None, budget_tokens: int | None) -> dict[str, Any]:
    """flag_overrides keywords for the flags (None: not given)."""
    return {"scaling__tts": tts, "scaling__policy": select_policy, "scaling__budget_tokens": budget_tokens}
