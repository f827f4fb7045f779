"""Validation by running, through the harness eval grades with: the task's images (`image_source`), the
one grading flow (`grade_in` / `run_plan`), the same log parser.

The tests cannot be listed before running, so the test patch's tests (the spec's directives for its
files) run on base + test patch and on base + test patch + gold, `reruns` times each, each run in a fresh
container. A pass that the harness's pytest guard did not see counts as a failure (the grade would
not trust it). A test whose result differs between the runs of one side is flaky and dropped. FAIL_TO_PASS:
failing (or missing) in every base run and passing in every gold run; PASS_TO_PASS: passing in all of
them. A task is kept only when FAIL_TO_PASS is not empty and then, graded as eval grades it
(`grade_patch`), the gold patch resolves and the empty patch does not.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..harness.env_grade import grade_patch
from ..harness.env_images import image_source
from ..harness.env_plan import Graded, grade_in
from ..harness.judge import judge_evidence, without_canaries
from ..harness.log_parsers import PASSING, parse_log
from ..harness.task_env import TaskEnvironment
from ..sandbox.errors import DockerUnavailable
from ..task import Task
from .candidates import Skip

Phase = Callable[[str], None]
RERUNS = 3
BROKEN = ("patch_apply_failed", "timeout", "harness_error")


@dataclass
class Validation:
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    flaky: list[str] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)  # one per run: side, outcome, tests, passed, seconds
    grades: dict[str, str] = field(default_factory=dict)  # gold / empty -> the eval grade's outcome
    layers_built: list[str] = field(default_factory=list)  # image layers this task built (none: all cached)


def brief(text: str, limit: int = 400) -> str:
    """A reason on one line, its start and its end when long (a build log's last lines say what failed)."""
    flat = " | ".join(line.strip() for line in text.splitlines() if line.strip())
    return flat if len(flat) <= limit else f"{flat[:limit // 3]} ... {flat[-(2 * limit) // 3:]}"


def lists_from_runs(base: list[dict[str, str]], gold: list[dict[str, str]]) -> tuple[list[str], list[str], list[str]]:
    """(FAIL_TO_PASS, PASS_TO_PASS, flaky) from the statuses of each base run and each gold run. A test
    missing from a run's log failed in it (SWE-bench's rule); one that passes in some runs of a side and
    not in others is flaky."""
    tests = list(dict.fromkeys(test for run in [*base, *gold] for test in run))
    f2p: list[str] = []
    p2p: list[str] = []
    flaky: list[str] = []
    for test in tests:
        before = {run.get(test) in PASSING for run in base}
        after = {run.get(test) in PASSING for run in gold}
        if len(before) > 1 or len(after) > 1:
            flaky.append(test)
        elif after == {True}:
            (p2p if before == {True} else f2p).append(test)
    return f2p, p2p, flaky


def statuses_of(graded: Graded, log_parser: str) -> dict[str, str]:
    """The run's statuses by its log, where a pass the harness's judge doubts (judge/: the grade that
    lists the test would call the log tampered) counts as failed: that test, where the evidence names
    it alone (the pytest plugin's "X: the log says ..."), else every test."""
    found = without_canaries(parse_log(log_parser, graded.log))
    run = graded.run
    if run is None or not run.judge:
        return found
    passing = [test for test, status in found.items() if status in PASSING]
    problems = [problem.split(": ", 1)[-1] for problem in judge_evidence(run.judge, graded.log, passing, run.exit_code)]
    doubted = {problem.split(": the log says ")[0] for problem in problems if ": the log says " in problem}
    if any(": the log says " not in problem for problem in problems):
        doubted = set(passing)
    return {test: ("FAILED" if test in doubted else status) for test, status in found.items()}


def validate(task: Task, *, reruns: int = RERUNS, log_dir: Path | None = None, phase: Phase | None = None) -> Validation:
    """Run the candidate task (see the module docstring); Skip with the reason when it is not kept.
    `log_dir`: where the build logs and each run's test log go."""
    say = phase or (lambda text: None)
    source = image_source(task)
    say("environment")
    try:
        grading = source.grading(log_dir, None)
    except DockerUnavailable:
        raise  # not the candidate's defect: the run stops, and the candidate is validated when it starts again
    except Exception as error:  # noqa: BLE001 - any build failure: the candidate is skipped, the run goes on
        raise Skip(f"environment: {brief(source.reason(error))}") from None
    plan = replace(grading.plan, fail_to_pass=[], pass_to_pass=[], network=False)
    runs: list[dict[str, Any]] = []
    statuses: dict[str, list[dict[str, str]]] = {"base": [], "gold": []}
    for side, patch in (("base", ""), ("gold", task.gold_patch or "")):
        for number in range(1, reruns + 1):
            say(f"{side} run {number}/{reruns}")
            started = time.monotonic()
            graded = grade_in(lambda: TaskEnvironment(task, grading.image, services=grading.services,
                                                      workspace=grading.workspace), patch, plan, reason=source.reason)
            outcome = getattr(graded.verdict.outcome, "value", graded.verdict.outcome)
            if outcome in BROKEN:
                raise Skip(f"{side} run: {outcome}: {brief(graded.verdict.reason or '')}")
            if log_dir is not None:
                log_dir.mkdir(parents=True, exist_ok=True)
                (log_dir / f"{side}-{number}.txt").write_text(graded.log, errors="replace")
            found = statuses_of(graded, plan.log_parser)
            statuses[side].append(found)
            runs.append({"side": side, "run": number, "outcome": outcome, "tests": len(found),
                         "passed": sum(status in PASSING for status in found.values()),
                         "seconds": round(time.monotonic() - started, 2)})
    if not any(run["tests"] for run in runs):
        raise Skip("no test results in any run: the tests do not run in this environment")
    if not any(run["passed"] for run in runs):  # not even with the fix: they cannot run here (an import fails...)
        raise Skip("no test passed in any run: the tests do not run in this environment")
    f2p, p2p, flaky = lists_from_runs(statuses["base"], statuses["gold"])
    if not f2p:
        raise Skip(f"no FAIL_TO_PASS test ({len(p2p)} pass->pass, {len(flaky)} flaky)")
    listed = task.model_copy(update={"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p})
    grades, reasons = {}, {}
    for name, patch in (("gold", task.gold_patch or ""), ("empty", "")):
        say(f"grade {name}")
        report = grade_patch(listed, patch, log_dir / f"grade-{name}" if log_dir else None)
        grades[name], reasons[name] = report["outcome"], str(report.get("reason") or "")
    if grades["gold"] != "resolved":
        raise Skip(f"gold does not resolve when graded ({grades['gold']}: {brief(reasons['gold'])})")
    if grades["empty"] == "resolved":
        raise Skip("the empty patch resolves when graded")
    return Validation(f2p, p2p, flaky, runs, grades, list(grading.facts.get("layers_built") or []))


def validate_shipped(task: Task, *, reruns: int = RERUNS) -> dict[str, Any]:
    """`validate` on whichever machine runs this (a Ray worker node), in a scratch folder of its own: only
    plain data comes back, {"validation": its fields} or {"skip": why}, with "files" (the logs by name)."""
    import shutil
    from dataclasses import asdict

    from ..harness.env_grade import collect_files
    from ..private_dirs import make_private_dir, remove_dead_owners

    remove_dead_owners("mine")  # the scratch of a worker that was killed mid-validation
    scratch = make_private_dir("mine")
    try:
        try:
            out: dict[str, Any] = {"validation": asdict(validate(task, reruns=reruns, log_dir=scratch))}
        except Skip as why:
            out = {"skip": str(why)}
        return {**out, "files": collect_files(scratch)}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
