"""Test-time scaling: make candidate solutions under a budget, verify them, let a policy choose one.

    pipeline.py        end to end: method -> verifiers -> selection (`scale`)
    budget.py          the one knob every method shares: generated tokens / model calls / runs; Metered
    methods.py         sample (best-of-N), and the methods' shared pieces (values, agreement, progress)
    evolve.py          rounds conditioned on the best candidates so far and their verifier feedback
    search.py          a tree over trajectory prefixes: UCT, branches from recorded states, backtracking
    runs.py            one agent run of a method (from the issue, an evolution prompt or a prefix), charged
    candidates.py      each candidate's config on the sampling schedule, and its model
    progress.py        SearchProgress: rounds, branches and values, for the TUI and the printers
    types.py           Candidate and Selection: what the stages pass around (re-exported here)
Verifiers:
    regression.py      does a candidate break existing tests that passed before (relevant_tests.py picks
                       them, test_command.py runs them where the repository names no command)
    reproduction.py    a test the agent writes that must fail before the fix and pass after
    judge.py           a model reads the issue and the patch: P(YES)
    consensus.py       tests most candidates break are the behaviour the fix changes: not held against them
    verifying.py       the verifiers of one task as candidates come: baseline and reproduction test found once
Choosing:
    normalize.py votes.py   patches that mean the same count as one answer with several votes
    similarity.py      how close two patches are (a softer signal)
    selection.py       the policies: vote, judge, tests, hybrid, random, tournament
    tournament.py      per-candidate summaries (summaries.py) and a pairwise knock-out judge
    scratch.py         apply a candidate patch to the base files in a scratch folder on the host
    offline.py         re-run the policies over stored candidates whose outcomes are known
"""

from .types import Candidate, Selection

__all__ = ["Candidate", "Selection"]
