"""Test-time scaling: sample N candidate solutions, verify them, let a policy choose one.

    pipeline.py        end to end: candidates -> verifiers -> selection (`scale`)
    candidates.py      N agent runs in parallel, each in its own sandbox, on a sampling schedule
    types.py           Candidate and Selection: what the stages pass around (re-exported here)
Verifiers:
    regression.py      does a candidate break existing tests that passed before (relevant_tests.py picks
                       them, test_command.py runs them where the repository names no command)
    reproduction.py    a test the agent writes that must fail before the fix and pass after
    judge.py           a model reads the issue and the patch: P(YES)
    consensus.py       tests most candidates break are the behaviour the fix changes: not held against them
Choosing:
    normalize.py votes.py   patches that mean the same count as one answer with several votes
    similarity.py      how close two patches are (a softer signal)
    selection.py       the policies: vote, judge, tests, hybrid, random
    scratch.py         apply a candidate patch to the base files in a scratch folder on the host
    offline.py         re-run the policies over stored candidates whose outcomes are known
"""

from .types import Candidate, Selection

__all__ = ["Candidate", "Selection"]
