"""Tasks from a repository's history (`codeagent tasks mine`): commits that change code and tests become
SWE-bench-format tasks, validated by running them through the harness.

    candidates.py   walk the first-parent history, split each diff (split.py), skip with a reason
    environment.py  a candidate as a Task in the harness's terms (SWE-bench spec, generic Python, a toolchain)
    validate.py     the test patch's tests on base and on gold, rerun; FAIL_TO_PASS / PASS_TO_PASS; the grade check
    statement.py    the problem statement and its leak check
    state.py        the resumable record of every candidate done
    output.py       the SWE-bench rows, dedupe, decontamination, the held-out split
    mining.py       the whole run: workers (threads or Ray), the set-up agent's second pass, the files written
    progress.py     the progress display: bars and a row per candidate on a terminal, lines elsewhere
    setup_agent.py  the set-up agent: a model repairs an environment in which the tests did not run
    demos.py        scripted demonstrations of mined tasks (the gold patch, a look) for SFT before GRPO
"""
