"""The configured verifiers of one task, run on candidates as they come (a round of evolution, a wave of
the search): what is the same for every candidate (the test command, the regression baseline, the
reproduction test) is found once, on the first call, and kept; a patch verified once is not verified
again (its scores and verdicts are copied: a judge's tokens are spent once per distinct patch). For a
SWE-bench-style task the harness's regression suite is prepared on the first call, its relevant test files
chosen from that call's patches (regression.py): a later round's patch that touches other modules is run
against those.

    verifier = Verifier(task, config, sandbox_factory, build_model)
    verifier(round_one)          # scores[...] and details[...] on each usable candidate, in place
    verifier(round_two)          # the same baseline, the same reproduction test
"""

from __future__ import annotations

from typing import Any

from ..config import Config
from ..harness import parse_log
from ..sandbox.restore import restore_patch
from ..task import Task
from .candidates import ModelFactory, SandboxFactory
from .types import Candidate

_UNSET: Any = object()
VERDICT_DETAILS = ("regression", "reproduction", "reproduction_test", "judge", "discarded")


class Verifier:
    def __init__(self, task: Task, config: Config, sandbox_factory: SandboxFactory, build_model: ModelFactory):
        self.task, self.config = task, config
        self.sandbox_factory, self.build_model = sandbox_factory, build_model
        self._command: Any = _UNSET  # (command, log parser, where it comes from)
        self._baseline: set[str] | None = None
        self._reproduction: Any = _UNSET  # (source or RepoTest or None, what happened)
        self._known: dict[str, tuple[dict, dict]] = {}  # patch -> (scores, verdict details)
        self._suite: Any = None  # the harness's regression suite (its baseline run), for a SWE-bench-style task

    def __call__(self, candidates: list[Candidate]) -> None:
        fresh: dict[str, Candidate] = {}
        copies = []
        for candidate in candidates:
            if not candidate.usable:
                continue
            if candidate.patch in self._known or candidate.patch in fresh:
                copies.append(candidate)
            else:
                fresh[candidate.patch] = candidate
        self._verify(list(fresh.values()), [c for c in candidates if c.usable])
        for candidate in fresh.values():
            self._known[candidate.patch] = (dict(candidate.scores), {key: candidate.details[key]
                                                                     for key in VERDICT_DETAILS if key in candidate.details})
        for candidate in copies:
            scores, details = self._known[candidate.patch]
            candidate.scores.update(scores)
            candidate.details.update(details)

    def _verify(self, usable: list[Candidate], every: list[Candidate]) -> None:
        """Verify the distinct patches `usable`; `every`: them and their copies (the harness's regression
        runs each patch once and counts every copy in its consensus)."""
        wanted = set(self.config.scaling.verifiers)
        if not usable:
            return
        if "regression" in wanted:
            if self._command is _UNSET:
                self._command = _test_command(self.task, self.config)
            command, parser, source = self._command
            if command:
                self._baseline = regression_by_command(command, usable, self.sandbox_factory,
                                                       self.config.limits.command_timeout, source=source,
                                                       log_parser=parser, baseline=self._baseline)
            elif _has_environment(self.task):  # a SWE-bench-style task: the harness runs its existing tests
                from .regression import score_candidates

                self._suite = score_candidates(self.task, every, suite=self._suite)
        if "reproduction" in wanted:
            from .reproduction import score_reproduction, write_reproduction

            if self._reproduction is _UNSET:
                model = self.build_model(self.config.model.name or "")
                self._reproduction = write_reproduction(self.task, self.config, model, self.sandbox_factory)
            test, what = self._reproduction
            for candidate in usable:
                candidate.details["reproduction_test"] = what
            if test is not None:
                score_reproduction(test, usable, self.sandbox_factory, self.config.limits.command_timeout)
        if "judge" in wanted:
            from .judge import judge

            judge(self.build_model(self.config.scaling.judge_model or self.config.model.name or ""),
                  self.task.problem_statement, usable, prompts_dir=self.config.agent.prompts_dir)


def _test_command(task: Task, config: Config) -> tuple[str | None, str, str]:
    """The regression tests' command, the log parser that reads its output and where they come from:
    scaling.test_command, the task's own, or (a repository with no environment spec) pytest when the
    repository's files say so, else the repository's own test report (its toolchain's: go test -json...)."""
    if config.scaling.test_command:
        return config.scaling.test_command, "pytest", "scaling.test_command"
    if task.test_command:
        return task.test_command, task.log_parser or "pytest", "the task's test_command"
    if _has_environment(task):
        return None, "", ""
    from ..harness import test_report
    from ..sandbox.workspace import snapshot
    from .test_command import detect_in_git

    snap = snapshot(task.repo, task.base_commit)
    found = detect_in_git(str(snap.git_dir), snap.commit)
    if found:
        return found[0], "pytest", found[1]
    report = test_report(snap)
    if report is None:
        return None, "", ""
    return report.command, report.log_parser, f"the repository's {report.language} tests, read as {report.log_parser}"


def _has_environment(task: Task) -> bool:
    from ..harness import SpecError, spec_for

    try:
        spec_for(task)
        return True
    except SpecError:
        return False


def regression_by_command(command: str, candidates: list[Candidate], sandbox_factory: SandboxFactory,
                          timeout: float, source: str = "", log_parser: str = "pytest",
                          baseline: set[str] | None = None) -> set[str]:
    """Run the tests on the original code (unless `baseline` gives what passed there), then on each
    candidate: scores["regression"] is the share of the originally passing tests that still pass.
    Results are read by `log_parser` (pytest's -rA report: added to a pytest command that lacks it).
    Returns the baseline."""

    if log_parser == "pytest" and "pytest" in command and "-rA" not in command.split():
        command = f"{command} -rA"

    from .test_command import run_report

    if baseline is None:
        with sandbox_factory() as sandbox:
            baseline = _passing(run_report(sandbox, command, timeout), log_parser)
    for candidate in candidates:
        with sandbox_factory() as sandbox:
            try:
                restore_patch(sandbox, candidate.patch)
            except Exception as exc:
                candidate.details["discarded"] = f"the patch does not apply: {exc}"
                continue
            after = _passing(run_report(sandbox, command, timeout), log_parser)
        broken = sorted(baseline - after)
        candidate.scores["regression"] = round(1.0 - len(broken) / len(baseline), 4) if baseline else 1.0
        candidate.details["regression"] = {"tests": len(baseline), "broken": broken[:20],
                                           "command": f"{command}" + (f" ({source})" if source else "")}
    return baseline


def _passing(output: str, log_parser: str = "pytest") -> set[str]:
    return {test for test, status in parse_log(log_parser, output).items() if status in ("PASSED", "XFAIL")}
