"""The reproduction verifier: an agent run writes a test that should fail on the original code
because of the issue; it is kept only if it does fail there; each candidate is scored by whether
that test passes with its patch.

In a Python repository the test is a pytest file at TEST_PATH, judged by pytest's exit code. In a
repository of another language (the rule of the regression verifier: no sign of pytest, a toolchain
detected) it is the new files the run adds, in the repository's own framework, judged by the
repository's test report (harness/toolchain/resolve.py test_report): its tests are the ids the report
names that the original code's run does not. A test that breaks the build of the original code (an
API the issue asks for) fails there for real, as a pytest collection error does.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..agent.prompts import render
from ..agent.run_types import RunOptions
from ..config import Config
from ..harness import parse_log
from ..models import Model
from ..sandbox.restore import restore_patch
from ..task import Task
from .candidates import SandboxFactory
from .types import Candidate

if TYPE_CHECKING:
    from ..harness import TestReport
    from ..sandbox import Sandbox

TEST_PATH = ".codeagent-scratch/reproduce_test.py"
# pytest: 1 = tests failed, 2 = collection error (often the missing API the issue is about)
FAILS_FOR_REAL = {1, 2}
PASSING = ("PASSED", "XFAIL")


@dataclass(frozen=True)
class RepoTest:
    """A reproduction test in the repository's own language: the files it adds, run by its test report."""

    files: tuple[tuple[str, str], ...]  # (path, text)
    report: TestReport
    before: frozenset[str]  # the test ids the original code's run reports without it


def reproduction_command(path: str = TEST_PATH) -> str:
    return f"python -m pytest -q -p no:cacheprovider {shlex.quote(path)}"


def write_reproduction(task: Task, config: Config, model: Model,
                       sandbox_factory: SandboxFactory) -> tuple[str | RepoTest | None, str]:
    """(the test's source, or a RepoTest in a repository of another language; what happened); None
    when no usable test came out."""
    from ..agent.loop import Agent

    own = config.model_copy(update={"agent": config.agent.model_copy(update={"review_on_submit": False})})
    report = _language_report(task)
    if report is not None:
        return _write_in_language(task, own, model, sandbox_factory, report, config.limits.command_timeout)
    with sandbox_factory() as sandbox:
        prompt = render("reproduce", config.agent.prompts_dir, problem_statement=task.problem_statement,
                        test_path=TEST_PATH, workdir=sandbox.workdir)
        result = Agent(model, own).run(task, sandbox, RunOptions(instance_prompt=prompt))
        try:
            source = sandbox.read_file(TEST_PATH).decode("utf-8", errors="replace")
        except FileNotFoundError:
            return None, f"the reproduction run ({result.exit_status}) wrote no {TEST_PATH}"
    with sandbox_factory() as original:  # a clean sandbox: the run may have touched other files
        original.write_file(TEST_PATH, source)
        outcome = original.run(reproduction_command(), timeout=config.limits.command_timeout)
    if outcome.exit_code not in FAILS_FOR_REAL:
        return None, (f"discarded: the reproduction test does not fail on the original code "
                      f"(exit {outcome.exit_code})")
    return source, f"kept: it fails on the original code (exit {outcome.exit_code})"


def score_reproduction(source: str | RepoTest, candidates: list[Candidate], sandbox_factory: SandboxFactory,
                       timeout: float) -> None:
    """scores["reproduction"] = 1.0 when the kept test passes with the candidate's patch."""
    judge: Callable[[Any, Any, float], tuple[bool, str]] = (
        _judge_in_language if isinstance(source, RepoTest) else _judge_python)
    for candidate in candidates:
        if not candidate.usable:
            continue
        with sandbox_factory() as sandbox:
            if not _applied(sandbox, candidate):
                continue
            passes, detail = judge(sandbox, source, timeout)
        candidate.scores["reproduction"] = 1.0 if passes else 0.0
        candidate.details["reproduction"] = detail


def _judge_python(sandbox, source, timeout: float) -> tuple[bool, str]:
    from ..harness.env_tests import judge_evidence, watched_run

    sandbox.write_file(TEST_PATH, source)
    run = watched_run(sandbox, reproduction_command(), "pytest", timeout, [TEST_PATH])
    if evidence := judge_evidence(run.judge or {}, run.log, [], run.exit_code):
        return False, "the run does not match what the harness's judge saw: " + "; ".join(evidence[:2])
    if run.exit_code == 0 and run.complete:
        return True, "passes"
    return False, f"fails (exit {run.exit_code}): {run.log.strip()[-300:]}"


def _language_report(task: Task) -> TestReport | None:
    """The repository's own test report when it is not a Python repository (no SWE-bench-style spec,
    no sign of pytest), else None."""
    from ..harness import SpecError, spec_for, test_report
    from ..sandbox.workspace import snapshot
    from .test_command import detect_in_git

    try:
        spec_for(task)
        return None
    except SpecError:
        pass
    snap = snapshot(task.repo, task.base_commit)
    return None if detect_in_git(str(snap.git_dir), snap.commit) else test_report(snap)


def _statuses(sandbox: Sandbox, report: TestReport, timeout: float) -> dict[str, str]:
    from .test_command import run_report

    return dict(parse_log(report.log_parser, run_report(sandbox, report.command, timeout)))


def _write_in_language(task: Task, config: Config, model: Model, sandbox_factory: SandboxFactory,
                       report: TestReport, timeout: float) -> tuple[RepoTest | None, str]:
    from ..agent.loop import Agent
    from ..harness import detect, human_test_command
    from ..sandbox.workspace import snapshot
    from .scratch import touched_files

    found = detect(snapshot(task.repo, task.base_commit))
    with sandbox_factory() as sandbox:
        prompt = render("reproduce_tests", config.agent.prompts_dir, problem_statement=task.problem_statement,
                        workdir=sandbox.workdir, test_command=human_test_command(found) if found else report.command)
        result = Agent(model, config).run(task, sandbox, RunOptions(instance_prompt=prompt))
        added = [item.new for item in touched_files(sandbox.diff()) if item.old is None and item.new]
        files = tuple((path, sandbox.read_file(path).decode("utf-8", errors="replace")) for path in added)
    if not files:
        return None, f"the reproduction run ({result.exit_status}) added no test file"
    with sandbox_factory() as original:  # a clean sandbox: the run may have touched other files
        before = _statuses(original, report, timeout)
        for path, text in files:
            original.write_file(path, text)
        after = _statuses(original, report, timeout)
    new = {test: status for test, status in after.items() if test not in before}
    named = ", ".join(path for path, _ in files)
    if new and all(status in PASSING for status in new.values()):
        return None, f"discarded: the reproduction test ({named}) does not fail on the original code"
    still = {test for test, status in after.items() if status in PASSING}
    if not new and {test for test, status in before.items() if status in PASSING} <= still:
        return None, f"discarded: the repository's tests ({report.command}) do not run the reproduction test ({named})"
    how = "its tests fail" if new else "the tests no longer build"
    return RepoTest(files, report, frozenset(before)), f"kept: it fails on the original code ({named}: {how})"


def _applied(sandbox, candidate: Candidate) -> bool:
    """Put the candidate's patch in the sandbox; False, with a 0 score, when it does not apply."""
    try:
        restore_patch(sandbox, candidate.patch)
    except Exception as exc:
        candidate.details["reproduction"] = f"the patch does not apply: {exc}"
        candidate.scores["reproduction"] = 0.0
        return False
    return True


def _judge_in_language(sandbox, test: RepoTest, timeout: float) -> tuple[bool, str]:
    from ..harness.env_tests import judge_evidence, watched_run, without_canaries

    for path, text in test.files:
        sandbox.write_file(path, text)
    run = watched_run(sandbox, test.report.command, test.report.log_parser, timeout, [path for path, _ in test.files])
    statuses = without_canaries(parse_log(test.report.log_parser, run.log))
    new = {name: status for name, status in statuses.items() if name not in test.before}
    if evidence := judge_evidence(run.judge or {}, run.log, list(new), run.exit_code):
        return False, "the run does not match what the harness's judge saw: " + "; ".join(evidence[:2])
    if new and all(status in PASSING for status in new.values()):
        return True, "passes"
    failing = sorted(name for name, status in new.items() if status not in PASSING)
    return False, f"fails: {', '.join(failing[:10])}" if failing else "fails: the reproduction test did not run"
