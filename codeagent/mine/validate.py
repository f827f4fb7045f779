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

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..harness import PASSING, parse_log
from ..harness.env_grade import grade_patch
from ..harness.env_images import image_source
from ..harness.env_tests import Graded, judge_evidence, run_plan_in_image, without_canaries
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
    held_added: list[str] = field(default_factory=list)  # held files the tests needed (in the gold patch now)
    failures: str = ""  # the base run's lines about the FAIL_TO_PASS tests (for a statement written from them)
    gold_failing: list[str] = field(default_factory=list)  # tests that fail in every run with the fix


def brief(text: str, limit: int = 400) -> str:
    """A reason on one line, its start and its end when long (a build log's last lines say what failed)."""
    flat = " | ".join(line.strip() for line in text.splitlines() if line.strip())
    return flat if len(flat) <= limit else f"{flat[:limit // 3]} ... {flat[-(2 * limit) // 3:]}"


def lists_from_runs(base: list[dict[str, str]], gold: list[dict[str, str]], touched: set[str] | None = None,
                    ) -> tuple[list[str], list[str], list[str]]:
    """(FAIL_TO_PASS, PASS_TO_PASS, flaky) from the statuses of each base run and each gold run. A test
    missing from a run's log failed in it (SWE-bench's rule); one that passes in some runs of a side and
    not in others is flaky. `touched` (a compiled language's tests): a test missing from every base run
    (its package did not build before the fix) is FAIL_TO_PASS only when the test patch touches it,
    as SWE-bench Multilingual's per-instance test commands select; the others are neither."""
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
            if before == {True}:
                p2p.append(test)
            elif touched is None or any(test in run for run in base) or is_touched(test, touched):
                f2p.append(test)
    return f2p, p2p, flaky


_TEST_NAMES = [re.compile(pattern) for pattern in (
    r"\bfunc\s+((?:Test|Benchmark|Example|Fuzz)\w*)",  # Go
    r"\bfn\s+(\w+)\s*\(",  # Rust
    r"\bvoid\s+(\w+)\s*\(",  # Java, C#
    r"\bdef\s+(test\w*)",  # Python
    r"\bTEST(?:_F|_P)?\s*\(\s*(\w+\s*,\s*\w+)\s*\)",  # googletest: suite, name
    r"\b(?:it|test|describe|context)(?:\.\w+)?\s*\(\s*(['\"`])(.+?)\1",  # JavaScript titles
)]


def touched_tests(test_patch: str) -> set[str]:
    """The tests a test patch adds or changes: definitions on its added lines and the functions its hunks sit in."""
    names: set[str] = set()
    for line in test_patch.splitlines():
        if line.startswith("@@"):
            text = line.split("@@", 2)[-1]
        elif line.startswith("+") and not line.startswith("+++"):
            text = line[1:]
        else:
            continue
        for pattern in _TEST_NAMES:
            for match in pattern.finditer(text):
                name = match.groups()[-1]
                names.add(re.sub(r"\s*,\s*", ".", name.strip()))
    return names


def is_touched(test: str, names: set[str]) -> bool:
    parts = set(re.split(r"::|#|/|\.| > ", test))
    return any(name in parts or name == test or (" " in name and name in test) for name in names)


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


class Interrupted(Exception):  # noqa: N818 - what happened, as Skip says
    """The run was asked to stop (SIGTERM, Ctrl-C): the candidate is recorded as interrupted and validated
    again by the next run, never skipped for it."""


# The validation skips that the held files (lockfiles, generated files) might cure: tried again with them.
NEEDS_HELD = ("no FAIL_TO_PASS", "gold does not resolve", "no test passed in any run", "no test results in any run",
              "the tests do not build")


def validate(task: Task, *, reruns: int = RERUNS, log_dir: Path | None = None, phase: Phase | None = None,
             cancel: threading.Event | None = None) -> Validation:
    """Run the candidate task (see the module docstring); Skip with the reason when it is not kept.
    `log_dir`: where the build logs and each run's test log go. The files the candidate holds aside
    (`held`: lockfiles, generated files) join the gold patch only when the tests need them: a test
    still fails with the fix alone (or none changes) and more pass with them.
    `cancel` set: Interrupted at the next step (the containers in flight are the caller's to stop)."""
    say = phase or (lambda text: None)
    source = image_source(task)
    _check(cancel)
    say("environment")
    try:
        grading = source.grading(log_dir, None)
    except DockerUnavailable:
        raise  # not the candidate's defect: the run stops, and the candidate is validated when it starts again
    except Exception as error:  # noqa: BLE001 - any build failure: the candidate is skipped, the run goes on
        _check(cancel)
        raise Skip(f"environment: {brief(source.reason(error))}") from None
    plan = replace(grading.plan, fail_to_pass=[], pass_to_pass=[], network=False)
    runner = _Runner(task, grading, plan, source, reruns, log_dir, say, cancel)
    base = runner.side("base", "")
    held = task.held or {}
    first: Validation | None = None
    try:
        first = runner.finish(base, task.gold_patch or "", [])
    except Skip as why:
        if not held.get("patch") or not str(why).startswith(NEEDS_HELD):
            raise
        reason = str(why)
    if not held.get("patch") or (first is not None and not first.gold_failing):
        assert first is not None
        return first
    files = list(held.get("files") or [])
    say(f"again with {', '.join(files)}")  # a test still fails with the fix: does it need them?
    try:
        second = runner.finish(base, (task.gold_patch or "") + held["patch"], files, "gold-held")
    except Skip as again:
        if first is not None:
            return first
        raise Skip(f"{reason}; with the held files ({', '.join(files)}) too: {again}") from None
    return second if first is None or len(second.fail_to_pass) > len(first.fail_to_pass) else first


class _Runner:
    """The runs of one candidate in one environment: a side's reruns, then the lists and the grades."""

    def __init__(self, task: Task, grading, plan, source, reruns: int, log_dir: Path | None, say: Phase,
                 cancel: threading.Event | None):
        self.task, self.grading, self.plan, self.source = task, grading, plan, source
        self.reruns, self.log_dir, self.say, self.cancel = reruns, log_dir, say, cancel
        self.runs: list[dict[str, Any]] = []
        self.logs: dict[str, list[str]] = {"base": [], "gold": []}

    def side(self, side: str, patch: str, label: str = "") -> list[dict[str, str]]:
        found_runs = []
        self.runs = [run for run in self.runs if run["side"] != side]
        self.logs[side] = []
        label = label or side
        for number in range(1, self.reruns + 1):
            _check(self.cancel)
            self.say(f"{side} run {number}/{self.reruns}")
            started = time.monotonic()
            graded = run_plan_in_image(self.task, self.plan, patch, image=self.grading.image,
                                       services=self.grading.services, workspace=self.grading.workspace,
                                       reason=self.source.reason)
            _check(self.cancel)  # a run the stop cut short says nothing about the candidate
            outcome = getattr(graded.verdict.outcome, "value", graded.verdict.outcome)
            if outcome in BROKEN:
                raise Skip(f"{side} run: {outcome}: {brief(graded.verdict.reason or '')}")
            if self.log_dir is not None:
                self.log_dir.mkdir(parents=True, exist_ok=True)
                (self.log_dir / f"{label}-{number}.txt").write_text(graded.log, errors="replace")
            found = statuses_of(graded, self.plan.log_parser)
            found_runs.append(found)
            self.logs[side].append(graded.log)
            self.runs.append({"side": side, "run": number, "outcome": outcome, "tests": len(found),
                              "passed": sum(status in PASSING for status in found.values()),
                              "seconds": round(time.monotonic() - started, 2)})
        return found_runs

    def finish(self, base: list[dict[str, str]], gold_patch: str, held_added: list[str], label: str = "gold") -> Validation:
        gold = self.side("gold", gold_patch, label)
        if not any(run["tests"] and run["passed"] for run in self.runs if run["side"] == "gold"):
            if lines := compiler_lines("\n".join(self.logs["gold"])):
                raise Skip(f"the tests do not build with the fix: {' | '.join(lines)}")
        if not any(run["tests"] for run in self.runs):
            raise Skip("no test results in any run: the tests do not run in this environment")
        if not any(run["passed"] for run in self.runs):  # not even with the fix: they cannot run here (an import fails...)
            raise Skip("no test passed in any run: the tests do not run in this environment")
        environment = self.task.environment if isinstance(self.task.environment, dict) else {}  # the miner's: a mapping
        compiled = environment.get("language") not in (None, "python")
        f2p, p2p, flaky = lists_from_runs(base, gold, touched_tests(self.task.test_patch or "") if compiled else None)
        if not f2p:
            lines = compiler_lines("\n".join(self.logs["gold"]))
            raise Skip(f"no FAIL_TO_PASS test ({len(p2p)} pass->pass, {len(flaky)} flaky)"
                       + (f"; the tests do not build with the fix: {' | '.join(lines)}" if lines else ""))
        listed = self.task.model_copy(update={"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p, "gold_patch": gold_patch})
        grades, reasons = {}, {}
        for name, patch in (("gold", gold_patch), ("empty", "")):
            _check(self.cancel)
            self.say(f"grade {name}")
            folder = f"grade-{name}" + ("-held" if held_added and name == "gold" else "")
            report = grade_patch(listed, patch, self.log_dir / folder if self.log_dir else None)
            _check(self.cancel)
            grades[name], reasons[name] = report["outcome"], str(report.get("reason") or "")
        if grades["gold"] != "resolved":
            raise Skip(f"gold does not resolve when graded ({grades['gold']}: {brief(reasons['gold'])})")
        if grades["empty"] == "resolved":
            raise Skip("the empty patch resolves when graded")
        failing = [test for test in dict.fromkeys(test for run in gold for test in run)
                   if not any(run.get(test) in PASSING for run in gold)]
        return Validation(f2p, p2p, flaky, list(self.runs), grades, list(self.grading.facts.get("layers_built") or []),
                          held_added, failures=failure_lines(self.logs["base"], f2p), gold_failing=failing)


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise Interrupted("stopped")


# A compiler's or an importer's error line, in the languages the harness runs (file:line: error...).
_COMPILER = re.compile(
    r"^(?:\S+\.go:\d+:\d+: .+"  # Go
    r"|error(?:\[E\d+\])?: .+|\s*--> \S+:\d+:\d+"  # Rust
    r"|\[ERROR\] .*\.(?:java|kt|scala):\[\d+,\d+\] .+"  # javac through Maven
    r"|\S+\.(?:java|kt):\d+: error: .+"  # javac, Gradle
    r"|\S+\.(?:c|cc|cpp|cxx|h|hh|hpp|m|mm):\d+:\d+: (?:fatal )?error: .+"  # gcc, clang
    r"|.*\berror TS\d+: .+"  # TypeScript
    r"|E?\s*(?:SyntaxError|ImportError|ModuleNotFoundError|IndentationError|NameError): .+)$")  # Python collection


def compiler_lines(log: str, limit: int = 6) -> list[str]:
    """The compiler's (or importer's) error lines of a test log, the first `limit` of them; `go test -json`'s
    build output is read from its events."""
    lines: list[str] = []
    for raw in log.splitlines():
        text = raw
        if raw.startswith("{") and '"Output"' in raw:
            try:
                text = str(json.loads(raw).get("Output") or "")
            except ValueError:
                pass
        for line in text.splitlines():
            line = line.rstrip()
            if _COMPILER.match(line) and line.strip() not in lines:
                lines.append(line.strip())
                if len(lines) >= limit:
                    return lines
    return lines


def failure_lines(logs: list[str], tests: list[str], limit: int = 40) -> str:
    """What the base runs' log says of the FAIL_TO_PASS tests (assertion lines, errors): the behaviour a
    statement written from the tests describes. Only the first run's; at most `limit` lines."""
    if not logs:
        return ""
    names = {test.split("::")[-1].split("/")[-1].split(".")[-1] for test in tests}
    keep: list[str] = []
    for line in logs[0].splitlines():
        text = line.strip()
        if text and (any(name and name in text for name in names) or re.search(
                r"(?i)\b(assert|expected|error|panic|fail|got|want|actual|mismatch|exception)", text)):
            keep.append(text[:300])
            if len(keep) >= limit:
                break
    return "\n".join(keep)


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
