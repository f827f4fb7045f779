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
        from .pipeline import _has_environment, _test_command, regression_by_command

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
