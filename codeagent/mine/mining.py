"""A mining run: walk the history, make each commit a candidate task or skip it with a reason, validate
the candidates on `workers` threads, record each one as it finishes (state.py), then write the output,
its held-out split and the rejects file from the record."""

from __future__ import annotations

import functools
import re
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..data.swebench import is_repo_name
from ..sandbox.errors import DockerUnavailable
from ..task import Task
from .candidates import Commit, Limits, Skip, candidate, shallow_edges
from .environment import Repository, task_for
from .output import Exclusions, dedupe, normalized_digest, read_exclusions, row, split, when, write_jsonl
from .progress import MiningProgress
from .setup_agent import find_setup, repairable
from .specify import requirements, underspecified, write_statement
from .state import INTERRUPTED, KEPT, SKIPPED, MiningState
from .statement import leaks, says_nothing, statement
from .stopping import stop_on_signals
from .validate import RERUNS, Interrupted, Validation, validate, validate_shipped
from .walk import history


@dataclass
class Options:
    since: str | None = None
    until: str | None = None
    max_commits: int | None = None
    after: str | None = None  # decontamination: only commits made after this date
    exclude: Path | None = None  # a benchmark's instances (rows or ids)
    split_date: str | None = None
    workers: int = 1
    reruns: int = RERUNS
    limits: Limits = field(default_factory=Limits)
    issues: dict[str, str] = field(default_factory=dict)  # issue number -> its text
    ref: str = "HEAD"
    executor: str = "local"  # local: `workers` threads here; ray: one Ray task per candidate
    ray_address: str | None = None  # ray: a running cluster (None: a one-node Ray here)
    setup: tuple[Any, Any] | None = None  # (model, agent config) of the set-up agent (setup_agent.py); None: none
    statement_model: Any = None  # writes each kept task's statement from its tests (specify.py); None: the history's


@dataclass
class Summary:
    commits: int = 0
    candidates: int = 0  # commits that reached validation
    kept: int = 0
    resumed: int = 0  # commits a previous run recorded
    skipped: Counter = field(default_factory=Counter)  # reason (its first words) -> count
    seconds: float = 0.0
    written: int = 0
    errors: int = 0  # validations that broke (not recorded: tried again by the next run)
    interrupted: int = 0  # candidates in flight when the run was stopped (recorded: validated by the next run)


def open_repository(source: str, name: str | None = None) -> Repository:
    """A local path, a local mirror or a URL (cloned once into the cache), and its owner/name."""
    from ..sandbox.workspace import snapshot

    git_dir = snapshot(source).git_dir
    name = name or _name_of(source, git_dir)
    if Path(source).expanduser().exists():  # the rows' provenance: where `eval grade` finds it again
        source = str(Path(source).expanduser().resolve())
    if not is_repo_name(name):
        raise ValueError(f"{name!r} is not owner/name: give the repository's name with --name OWNER/NAME")
    return Repository(git_dir, name, source)


def _name_of(source: str, git_dir: Path) -> str:
    remote = subprocess.run(["git", "--git-dir", str(git_dir), "config", "remote.origin.url"], capture_output=True,
                            text=True).stdout.strip()
    for text in (source, remote):
        if match := re.search(r"github\.com[/:]([^/]+/[^/]+?)(?:\.git)?/?$", text):
            return match.group(1)
    for part in reversed(Path(source).resolve().parts):  # a mirror folder named owner+name (fetch's layout)
        if re.fullmatch(r"[\w.-]+\+[\w.-]+", part):
            return part.replace("+", "/", 1)
    folder = Path(source).resolve().name.removesuffix(".git")
    return f"local/{folder if folder not in ('', 'repo', '.git') else Path(source).resolve().parent.name}"


def prepare(repo: Repository, commit: Commit, options: Options, shallow: frozenset[str],
            exclusions: Exclusions | None, seen: set[str]) -> Task:
    """The unit as a task ready to validate, or Skip: the split, the filters, the environment, the statement."""
    if options.after and when(commit.date) <= when(options.after):
        raise Skip(f"made before --after {options.after}")
    found = candidate(repo.git_dir, commit, options.limits, shallow)
    digest = normalized_digest(found.gold_patch)
    if digest in seen:
        raise Skip("duplicate: the same change is already a task")
    text = statement(commit.message, options.issues)
    if options.statement_model is None and (empty := says_nothing(text)):
        raise Skip(empty)  # a model writes one from the tests; without one, there is nothing to give a solver
    task = task_for(repo, found, options.ref)
    if exclusions is not None and exclusions.match(repo.name, task.instance_id, task.base_commit, task.gold_patch):
        raise Skip("excluded: an instance of a named benchmark")
    if leaked := leaks(text, found.gold_patch):
        raise Skip(f"statement leaks the fix: {leaked[0][:80]!r}")
    seen.add(digest)
    found_here: dict[str, Any] = {"commit": commit.sha, "unit": commit.kind}
    if commit.kind == "pull":
        found_here["head"] = commit.head
    if found.held_patch:
        found_here["held"] = {"patch": found.held_patch, "files": found.held_files}
    if found.dropped_files:
        found_here["dropped_files"] = found.dropped_files
    return task.model_copy(update={"problem_statement": text, **found_here})


def final_statement(task: Task, validation: Validation, options: Options) -> tuple[str, dict[str, Any]]:
    """The kept task's statement and how it was made; Skip when it is underspecified or leaks the fix. With
    a statement model, written from the tests (specify.py); else the history's, as it is."""
    gold = (task.gold_patch or "") + ((task.held or {}).get("patch", "") if validation.held_added else "")
    required = requirements(gold, task.test_patch or "")
    text, source = task.problem_statement, "history"
    if options.statement_model is not None:
        text = write_statement(options.statement_model, repo=str(task.swebench_repo), history_text=text,
                               test_patch=task.test_patch or "", fail_to_pass=validation.fail_to_pass,
                               failures=validation.failures, required=required)
        source = f"model:{getattr(options.statement_model, 'name', type(options.statement_model).__name__)}"
        if empty := says_nothing(text):
            raise Skip(f"{source}: {empty}")
    if leaked := leaks(text, gold):
        raise Skip(f"statement leaks the fix ({source}): {leaked[0][:80]!r}")
    if reason := underspecified(text, required):
        raise Skip(f"{reason} ({source})")
    return text, {"source": source, "requirements": required}


def mine(repo: Repository, output: Path, options: Options, progress: MiningProgress | None = None) -> Summary:
    """The whole run (the module docstring). SIGTERM and SIGINT stop it at once (stopping.py): the candidates in
    flight are recorded as interrupted, the files written, and the signal's exception raised again."""
    from ..sandbox.engine import docker_client

    started = time.monotonic()
    show = progress or MiningProgress()
    state = MiningState(output)
    summary = Summary()
    exclusions = read_exclusions(options.exclude) if options.exclude else None
    commits = history(repo.git_dir, options.ref, since=options.since, until=options.until,
                      max_commits=options.max_commits, owner=repo.name.split("/")[0])
    summary.commits = len(commits)
    shallow = frozenset(shallow_edges(repo.git_dir))
    seen = {normalized_digest(item["patch"]) for item in state.kept()}
    tasks: list[Task] = []
    show.scanning(len(commits))
    for commit in commits:
        if state.done(commit.sha):
            summary.resumed += 1
            show.scanned(commit.sha, None, resumed=True)
            continue
        try:
            tasks.append(prepare(repo, commit, options, shallow, exclusions, seen))
            show.scanned(commit.sha, None)
        except Skip as why:
            _skip(state, summary, commit.sha, "candidate", str(why))
            show.scanned(commit.sha, str(why))
    summary.candidates = len(tasks)
    if tasks:
        docker_client()  # no engine: one clear error now, not every candidate skipped for it
    show.line(f"{len(commits)} commits, {summary.resumed} done before, {len(tasks)} candidates to validate")
    show.validating(len(tasks))
    repairs: list[tuple[Task, str]] = []  # skipped for their environment, for the set-up agent
    cancel, running = threading.Event(), _Running()
    try:
        with stop_on_signals(cancel):
            for task, result, error in _validations(tasks, output, options, show, cancel, running):
                if options.setup is not None and isinstance(error, Skip) and repairable(task, str(error)):
                    repairs.append((task, str(error)))
                    show.phase(_short(task), f"environment to repair: {error}")
                    continue
                _record(state, summary, show, repo, task, result, error, options)
            if repairs:
                _repair(repairs, output, options, state, summary, show, repo, cancel, running)
    except BaseException:
        if cancel.is_set():  # stopped: what was in flight is recorded as such, and the files are written
            for task in running.left():
                state.add({"commit": task.commit, "status": INTERRUPTED})
                summary.interrupted += 1
            show.line(f"stopped: {summary.interrupted} candidates in flight recorded as interrupted "
                      "(validated again when the same command runs again)")
            summary.written = write_outputs(output, state, options.split_date)
        raise
    summary.written = write_outputs(output, state, options.split_date)
    summary.seconds = time.monotonic() - started
    return summary


class _Running:
    """The candidates whose validation started and has not been recorded (thread-safe)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._tasks: dict[str, Task] = {}

    def started(self, task: Task) -> None:
        with self._lock:
            self._tasks[task.instance_id] = task

    def ended(self, task: Task) -> None:
        with self._lock:
            self._tasks.pop(task.instance_id, None)

    def left(self) -> list[Task]:
        with self._lock:
            return list(self._tasks.values())


def _repair(repairs: list[tuple[Task, str]], output: Path, options: Options, state: MiningState, summary: Summary,
            show: MiningProgress, repo: Repository, cancel: threading.Event, running: _Running) -> None:
    """The set-up agent on each candidate whose environment let no test run, then its validation again
    with what the agent found (recorded either way: a finding that does not help is a skip)."""
    assert options.setup is not None
    model, config = options.setup
    repaired = []
    for task, reason in repairs:
        show.phase(_short(task), "set-up agent")
        try:
            repaired.append(find_setup(task, reason, model, config))
        except Skip as why:
            _record(state, summary, show, repo, task, None, Skip(f"{reason}; {why}"), options)
    for task, result, error in _validations(repaired, output, options, show, cancel, running):
        if isinstance(error, Skip):
            error = Skip(f"with the set-up agent's environment: {error}")
        _record(state, summary, show, repo, task, result, error, options)


def _record(state: MiningState, summary: Summary, show: MiningProgress, repo: Repository, task: Task, result,
            error: BaseException | None, options: Options) -> None:
    """One candidate's validation, done: kept, skipped (both recorded), interrupted (recorded: validated
    again by the next run) or broken (not recorded: tried again next run). A validated task is kept only
    with a statement that states what its tests check (specify.py)."""
    sha = str(task.commit)
    if error is None:
        try:
            text, made = final_statement(task, result, options)
        except Skip as why:
            error = why
        else:
            item = row(task.model_copy(update={"problem_statement": text}), sha, repo.source, result, made)
            state.add({"commit": sha, "status": KEPT, "row": item})
            summary.kept += 1
            show.validated(sha, True, f"kept: {len(result.fail_to_pass)} FAIL_TO_PASS, "
                                      f"{len(result.pass_to_pass)} PASS_TO_PASS, {len(result.flaky)} flaky dropped")
            return
    if isinstance(error, Skip):
        _skip(state, summary, sha, "validation", str(error))
        show.validated(sha, False, f"skipped (validation): {error}")
    elif isinstance(error, Interrupted):
        state.add({"commit": sha, "status": INTERRUPTED})
        summary.interrupted += 1
        show.validated(sha, False, "interrupted (validated again by the next run)")
    elif isinstance(error, DockerUnavailable):
        raise error
    else:  # not recorded: the next run tries it again
        summary.errors += 1
        show.validated(sha, False, f"error (not recorded, tried again next run): {type(error).__name__}: {error}")


def _validations(tasks: list[Task], output: Path, options: Options, show: MiningProgress, cancel: threading.Event,
                 running: _Running):
    """(task, Validation, error) as each candidate's validation ends: on threads here, or as Ray tasks
    (each on some node's Docker engine, its logs shipped back and written here)."""
    if options.executor == "ray":
        from ..executors.ray_executor import RayExecutor
        from ..executors.shipped import write_shipped_files

        shipped_job = functools.partial(validate_shipped, reruns=options.reruns)
        for task, shipped, error in RayExecutor(options.ray_address).map_unordered(shipped_job, tasks):
            if error is None:
                write_shipped_files(logs_path(output) / task.instance_id, shipped["files"])
                error = Skip(shipped["skip"]) if "skip" in shipped else None
            yield task, (None if error else Validation(**shipped["validation"])), error
        return
    from ..executors.local import LocalExecutor

    def job(task: Task) -> Validation:
        running.started(task)
        try:
            return validate(task, reruns=options.reruns, log_dir=logs_path(output) / task.instance_id,
                            phase=lambda text: show.phase(_short(task), text), cancel=cancel)
        except Exception:
            if cancel.is_set():  # whatever broke, it broke because the run was stopped
                raise Interrupted("stopped") from None
            raise

    for task, result, error in LocalExecutor(options.workers, threads=True).map_unordered(job, tasks):
        running.ended(task)
        yield task, result, error


def _short(task: Task) -> str:
    return str(task.commit)[:10]


def _skip(state: MiningState, summary: Summary, sha: str, phase: str, reason: str) -> None:
    state.add({"commit": sha, "status": SKIPPED, "phase": phase, "reason": reason})
    summary.skipped[reason.split(":")[0]] += 1


def logs_path(output: Path) -> Path:
    return output.with_name(f"{output.stem}.logs")


def rejects_path(output: Path) -> Path:
    return output.with_name(f"{output.stem}.rejects.jsonl")


def write_outputs(output: Path, state: MiningState, split_date: str | None) -> int:
    """The output (every kept task, deduped, with `split` when asked and its two sides beside it) and the
    rejects file; the number of rows written."""
    rows: list[dict[str, Any]] = dedupe(state.kept())
    if split_date:
        rows = split(rows, split_date)
        for side in ("train", "test"):
            write_jsonl(output.with_name(f"{output.stem}.{side}.jsonl"), [item for item in rows if item["split"] == side])
    write_jsonl(output, rows)
    write_jsonl(rejects_path(output), state.skipped())
    return len(rows)
