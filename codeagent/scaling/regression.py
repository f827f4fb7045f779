"""The regression verifier: do a candidate's changes break existing tests that passed before?

For a task in SWE-bench format with an environment spec:

1. Choose the relevant existing test files (relevant_tests.py); FAIL_TO_PASS and the test patch
   are hidden and never read.
2. Run those files once on the original code, in a fresh task environment (harness/grading/task_env.py:
   the instance image, the harness's test runner, log parsers and grading). The relevant tests
   are the ones that pass there (and are in PASS_TO_PASS when it is given).
3. Run them on each candidate, in a fresh environment, with the test files being run put back to
   their original version (editing a test does not fix a regression): score = the fraction still
   passing (a skip is not a break, as in grading); `details["regression"]` lists what broke. A
   patch that does not apply scores 0 and is marked discarded; a run that timed out scores 0; an
   infrastructure failure leaves no score (the verifier did not run for that candidate). Tests
   most candidates break are left out of the scores (consensus.py).
4. A patch that touches test infrastructure (a conftest.py, test settings, the test files run,
   test files in general: harness/grading/integrity.py), or whose run passes a test the log also reports
   failing, scores 0, outcome `test_infrastructure`, unless `test_infrastructure="allow"`: its
   tests may pass because of what it changed in them. A run whose log does not match what
   codeagent's pytest plugin saw (harness/grading/guard.py) scores 0 whatever the policy: no status in
   that log can be trusted.

Results can be cached on disk (`cache_dir`): the baseline per task, each candidate's run per patch.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..task import Task
from .consensus import CONSENSUS, apply_consensus
from .relevant_tests import choose_test_files
from .types import Candidate

SCHEMA = 1  # part of every cache key
RUN_SCHEMA = 3  # part of a run's cache key (2: runs record the test infrastructure a patch touches; 3: tamper evidence)


@dataclass
class RegressionSuite:
    """The relevant tests of one task and how to run them."""

    instance_id: str
    image: str
    command: str
    log_parser: str
    timeout: float
    files: list[str]  # the test files (or labels) run
    source: str  # "PASS_TO_PASS" or "touched modules"
    tests: list[str] = field(default_factory=list)  # relevant: pass on the original code
    base: dict[str, Any] = field(default_factory=dict)  # the baseline run: outcome, counts, seconds
    error: str | None = None  # why there is no usable baseline

    @property
    def usable(self) -> bool:
        return not self.error and bool(self.tests)

    def key(self) -> str:
        payload = {"schema": SCHEMA, "image": self.image, "command": self.command, "parser": self.log_parser,
                   "tests": self.tests}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


# -------------------------------------------------------------------------------- running tests

def _command(task: Task, spec, files: list[str]) -> str:
    """The harness's test command (spec test_cmd, test_env, pre_test, Django labels) for `files`,
    made by the harness's own directive code from a header-only diff that names them."""
    from ..harness import test_command

    headers = "".join(f"diff --git a/{path} b/{path}\n" for path in files)
    return test_command(task.model_copy(update={"test_patch": headers}), spec)


def _run(task: Task, image: str, command: str, parser: str, timeout: float, tests: list[str],
         patch: str, reset: Sequence[str] = ()) -> dict[str, Any]:
    """One run in a fresh task environment, through the harness's grading flow (harness/grading/plan.py):
    apply `patch` (none when empty), put the `reset` files back to their original version (a candidate
    cannot make an existing test pass by editing it), run `command`, grade `tests` as must-stay-passing."""
    from ..harness import parse_log
    from ..harness.env_images import image_source
    from ..harness.env_tests import run_plan_in_image, suite_plan, without_canaries

    started = time.monotonic()
    result: dict[str, Any] = {}
    services = image_source(task).services
    graded = run_plan_in_image(task, suite_plan(command, parser, timeout, tests, list(reset)), patch,
                               image=image, services=services)
    verdict, run = graded.verdict, graded.run
    if graded.applied is not None and patch.strip():
        result["test_infrastructure"] = graded.flags
    if verdict.outcome.value == "patch_apply_failed":
        result.update(outcome="patch_apply_failed", reason=verdict.reason[-1500:])
    elif run is None:  # infrastructure, not the candidate
        result.update(outcome="harness_error", reason=verdict.reason)
    else:
        result.update(outcome=verdict.outcome.value, reason=verdict.reason, consistent=verdict.consistent,
                      exit_code=run.exit_code, statuses=without_canaries(parse_log(parser, run.log)),
                      passed=verdict.p2p_passed,
                      failed=verdict.p2p_failed, masked_failures=verdict.masked_failures,
                      tamper_evidence=verdict.tamper_evidence, test_seconds=round(run.seconds, 2))
    result["seconds"] = round(time.monotonic() - started, 2)
    return result


def prepare_suite(task: Task, patches: Sequence[str] = (), *, cache_dir: str | Path | None = None,
                  files: list[str] | None = None) -> RegressionSuite:
    """Choose the relevant test files, build (or reuse) the task's images, and run the files once
    on the original code. `patches`: the candidates' patches, for discovery when the task has no
    PASS_TO_PASS. The suite is cached in cache_dir/<instance>/suite-<key>.json."""
    from ..harness import spec_for
    from ..harness.env_images import image_source

    if files is None:
        files, source = choose_test_files(task, patches)
    else:
        source = "given"
    spec = spec_for(task)
    command = _command(task, spec, files) if files else ""
    suite = RegressionSuite(task.instance_id, "", command, spec.log_parser, float(spec.test_timeout), files, source)
    if not files:
        suite.error = "no relevant test file found"
        return suite
    try:
        suite.image = image_source(task).test_image()
    except Exception as exc:
        suite.error = f"the environment could not be built: {exc}"
        return suite
    cached = _cache_path(cache_dir, task.instance_id, "suite", suite.image, command, spec.log_parser,
                         sorted(task.PASS_TO_PASS))
    if cached and cached.is_file():
        return RegressionSuite(**json.loads(cached.read_text()))
    wanted = list(task.PASS_TO_PASS)
    base = _run(task, suite.image, command, spec.log_parser, suite.timeout, wanted, "")
    statuses: dict[str, str] = base.pop("statuses", {}) or {}
    if not _passing(statuses) and len(files) > 1 and base["outcome"] != "harness_error":
        # One file can stop the whole run (a module that fails to import: pytest is interrupted,
        # sympy's runner aborts): keep the files in which some test passes on its own.
        working = []
        for path in files:
            alone = _run(task, suite.image, _command(task, spec, [path]), spec.log_parser, suite.timeout, wanted, "")
            if _passing(alone.get("statuses") or {}):
                working.append(path)
        if working and working != files:
            suite.files, suite.command = working, _command(task, spec, working)
            base = _run(task, suite.image, suite.command, spec.log_parser, suite.timeout, wanted, "")
            statuses = base.pop("statuses", {}) or {}
            suite.base["dropped_files"] = [path for path in files if path not in working]
    suite.base.update({k: base.get(k) for k in ("outcome", "reason", "exit_code", "seconds", "test_seconds",
                                                "masked_failures")})
    suite.base["tests_in_log"] = len(statuses)
    if base["outcome"] in ("timeout", "harness_error") or not _passing(statuses):
        suite.error = f"the baseline run failed: {base['outcome']}: {str(base.get('reason'))[:500]}"
    elif wanted:
        suite.tests = list(base.get("passed") or [])
    else:
        suite.tests = sorted(test for test, status in statuses.items() if status in ("PASSED", "XFAIL"))
    if not suite.error and not suite.tests:
        suite.error = "no relevant test passes on the original code"
    if cached and suite.base.get("outcome") != "harness_error":
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps(asdict(suite)))
    return suite


def _passing(statuses: dict[str, str]) -> bool:
    return any(status in ("PASSED", "XFAIL") for status in statuses.values())


def run_candidate(task: Task, suite: RegressionSuite, patch: str, *, cache_dir: str | Path | None = None,
                  test_infrastructure: str = "zero") -> dict[str, Any]:
    """The suite on one patch: {"score", "passed", "total", "broken", "outcome", ...}; "score" is
    None when the run could not say (infrastructure failure or no usable suite). A patch that
    touches test infrastructure scores 0 unless `test_infrastructure` is "allow"."""
    from ..harness import zeroed

    zeroed({}, test_infrastructure)  # a bad policy is an error before any run
    if not suite.usable:
        return {"score": None, "outcome": "not_run", "reason": suite.error or "no relevant tests"}
    cached = _cache_path(cache_dir, task.instance_id, "run", RUN_SCHEMA, suite.key(), patch)
    if cached and cached.is_file():
        return _integrity_policy(json.loads(cached.read_text()), test_infrastructure)
    run = _run(task, suite.image, suite.command, suite.log_parser, suite.timeout, suite.tests, patch, reset=suite.files)
    total = len(suite.tests)
    outcome = run["outcome"]
    report: dict[str, Any] = {"outcome": outcome, "total": total, "seconds": run["seconds"]}
    flags = run.get("test_infrastructure") or {}
    if flags:
        report.update(touches_test_infrastructure=sorted(flags), test_infrastructure=flags)
    masked = [test for test in run.get("masked_failures") or [] if test not in (suite.base.get("masked_failures") or [])]
    if masked:  # the original code's run masks none of these (a junk id masked there too says nothing)
        report["masked_failures"] = masked
    if run.get("tamper_evidence"):  # the log does not match what codeagent's pytest plugin saw (harness/grading/guard.py)
        report["tamper_evidence"] = run["tamper_evidence"]
    if outcome == "harness_error":
        report.update(score=None, reason=run.get("reason"))
        return report  # not cached: try again next time
    if outcome == "patch_apply_failed":
        report.update(score=0.0, passed=0, broken=[], reason="the patch does not apply")
    elif outcome == "timeout":
        report.update(score=0.0, passed=0, broken=[], reason="the tests timed out")
    elif not run.get("consistent", True):  # the runner aborted, or the log does not match the run
        report.update(outcome="aborted", score=0.0, passed=0, broken=[], reason=run.get("reason"))
    elif run.get("tamper_evidence"):  # the log does not match what the guard saw: no status in it counts
        report.update(outcome="tamper_evidence", score=0.0, passed=0, broken=[], reason=run.get("reason"))
    else:
        passed = len(run.get("passed") or [])
        broken = list(run.get("failed") or [])
        statuses = run.get("statuses") or {}
        report.update(score=round(passed / total, 4) if total else None, passed=passed, broken=broken,
                      broken_count=len(broken),
                      broken_status={test: statuses.get(test, "MISSING") for test in broken[:20]})
    if cached:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps(report))
    return _integrity_policy(report, test_infrastructure)


def _integrity_policy(report: dict[str, Any], policy: str) -> dict[str, Any]:
    """Score 0 a run whose patch touches test infrastructure, under the "zero" policy (the run's
    own figures stay in the report; the cache keeps the run as it was)."""
    from ..harness import reasons, zeroed

    if not zeroed(report, policy) or report.get("score") is None:
        return report
    return {**report, "run_outcome": report["outcome"], "run_score": report["score"], "score": 0.0,
            "outcome": "test_infrastructure", "reason": "not to be trusted: " + ", ".join(reasons(report))}


def score_candidates(task: Task, candidates: Sequence[Candidate], *, suite: RegressionSuite | None = None,
                     cache_dir: str | Path | None = None, workers: int = 1, dedupe: bool = True,
                     consensus: float | None = CONSENSUS, test_infrastructure: str = "zero") -> RegressionSuite:
    """Set `scores["regression"]` and `details["regression"]` on each candidate (in place) and return
    the suite. Candidates with the same patch text (or, with `dedupe`, the same details["normalized"]
    key) share one run. Empty or discarded candidates are not run.

    `consensus`: a test that more than this share of the candidates break (two at least) is taken
    as behaviour the fix is meant to change (an existing test asserting the old behaviour), and is
    left out of every candidate's score; the raw score stays in details (None: no adjustment).
    `test_infrastructure`: "zero" (default) or "allow", see run_candidate."""
    if suite is None:
        suite = prepare_suite(task, [c.patch for c in candidates], cache_dir=cache_dir)
    if not suite.usable:
        for candidate in candidates:
            candidate.details["regression"] = {"outcome": "not_run", "reason": suite.error}
        return suite

    def share_key(candidate: Candidate) -> str:
        key = candidate.details.get("normalized") if dedupe else None
        return key or hashlib.sha256(candidate.patch.encode("utf-8", "surrogateescape")).hexdigest()

    todo: dict[str, Candidate] = {}
    for candidate in candidates:
        if candidate.usable:
            todo.setdefault(share_key(candidate), candidate)
    with ThreadPoolExecutor(max(1, workers)) as pool:
        reports = list(pool.map(lambda c: run_candidate(task, suite, c.patch, cache_dir=cache_dir,
                                                        test_infrastructure=test_infrastructure), todo.values()))
    results = dict(zip(todo, reports))
    for candidate in candidates:
        if not candidate.usable:
            candidate.details.setdefault("regression", {"outcome": "not_run", "reason": "discarded"})
            continue
        report = dict(results[share_key(candidate)])
        candidate.details["regression"] = report
        if report.get("score") is not None:
            candidate.scores["regression"] = float(report["score"])
        if report.get("outcome") == "patch_apply_failed":
            candidate.details["discarded"] = "does not apply"
    if consensus is not None:
        apply_consensus(candidates, consensus)
    return suite


def cached_suites(cache_dir: str | Path, instance_id: str) -> list[RegressionSuite]:
    """The suites cached for an instance, newest first (several when its image changed)."""
    folder = Path(cache_dir) / (re.sub(r"[^\w.-]", "_", instance_id) or "task")
    paths = sorted(folder.glob("suite-*.json"), key=lambda path: path.stat().st_mtime, reverse=True)
    return [RegressionSuite(**json.loads(path.read_text())) for path in paths]


def cached_run(cache_dir: str | Path, instance_id: str, suite: RegressionSuite, patch: str, *,
               test_infrastructure: str = "zero") -> dict[str, Any] | None:
    """A run of `suite` on `patch` from the cache, or None (scored as run_candidate scores it)."""
    path = _cache_path(cache_dir, instance_id, "run", RUN_SCHEMA, suite.key(), patch)
    if not path or not path.is_file():
        return None
    return _integrity_policy(json.loads(path.read_text()), test_infrastructure)


def _cache_path(cache_dir: str | Path | None, instance_id: str, kind: str, *parts: Any) -> Path | None:
    if cache_dir is None:
        return None
    digest = hashlib.sha256(json.dumps([SCHEMA, *parts], sort_keys=True, default=str).encode("utf-8", "surrogateescape"))
    safe = re.sub(r"[^\w.-]", "_", instance_id) or "task"
    return Path(cache_dir) / safe / f"{kind}-{digest.hexdigest()[:20]}.json"
