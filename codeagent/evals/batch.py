"""Batch grading and batch agent runs over many tasks, resumable (see runner.py for the layout)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from .. import patches as patch_bytes
from ..data.ids import check_distinct_folders
from ..executors.local import Executor, LocalExecutor
from ..harness.env_grade import collect_files, grade_patch, grade_shipped
from ..harness.env_grade import say as _say
from ..harness.env_images import OFFLINE_HINT
from ..task import Task
from .phases import PHASE_FILE, clear_phase, set_phase
from .runner import BatchDir, is_error, process_instance, write_json_atomic

Progress = Callable[[dict], None]


def grade_task(task: Task, patch: str, instance_dir: Path) -> dict:
    """The task's images got (built or pulled) and `patch` graded (harness/env_grade.py), with the
    instance's phases for the progress display: the full per-instance report."""
    return grade_patch(task, patch, instance_dir, phase=lambda text: set_phase(instance_dir, text),
                       progress=lambda line: _say(task.instance_id, line))


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _grade_one(job: tuple[dict, str, str, str]) -> dict:
    task_data, output, model_name, patch = job
    task = Task.model_validate(task_data)
    state = BatchDir(output).instance(task.instance_id)

    def produce() -> dict:
        return {"instance_id": task.instance_id, "model_name_or_path": model_name, "model_patch": patch,
                "patch_sha256": patch_bytes.digest(patch)}

    return process_instance(state, produce, lambda prediction: grade_task(task, prediction["model_patch"], state.root))


def changed_predictions(batch: BatchDir, patches: dict[str, str]) -> list[str]:
    """Instances whose stored prediction is not the patch given now (a rerun with new predictions)."""
    changed = []
    for instance_id, patch in patches.items():
        stored = batch.instance(instance_id).prediction()
        if stored is not None and patch_bytes.digest(stored.get("model_patch") or "") != patch_bytes.digest(patch):
            changed.append(instance_id)
    return changed


def grade_batch(tasks: list[Task], patches: dict[str, str], output: str | Path, *, model_name: str,
                executor: Executor | None = None, progress: Progress | None = None) -> list[dict]:
    """Grade a prediction per task. Instances already graded in `output` with the same patch are
    skipped; one whose patch changed since is graded again (the old files kept as *.previous.json)."""
    ids = [task.instance_id for task in tasks]
    check_distinct_folders(ids)
    batch = BatchDir(output)
    for instance_id in changed_predictions(batch, {i: patches.get(i, "") for i in ids}):
        batch.discard(instance_id)
    todo = set(batch.pending(ids))
    executor = executor or LocalExecutor()
    if getattr(executor, "ships_results", False):  # no shared filesystem: the prediction is written here
        for task in tasks:
            if task.instance_id in todo:
                patch = patches.get(task.instance_id, "")
                state = batch.instance(task.instance_id)
                if state.prediction() is None:
                    write_json_atomic(state.prediction_path, {
                        "instance_id": task.instance_id, "model_name_or_path": model_name, "model_patch": patch,
                        "patch_sha256": patch_bytes.digest(patch)})
        jobs = [(task.model_dump(), patches.get(task.instance_id, "")) for task in tasks if task.instance_id in todo]
        _drive_shipped(batch, executor, grade_shipped, jobs, progress)
    else:
        jobs = [(task.model_dump(), str(output), model_name, patches.get(task.instance_id, ""))
                for task in tasks if task.instance_id in todo]
        _drive(batch, executor, _grade_one, jobs, progress)
    batch.write_predictions(ids)
    return batch.reports(ids)


def _drive(batch: BatchDir, executor: Executor, fn, jobs: list, progress: Progress | None) -> None:
    for job in jobs:  # what a killed run's workers left
        clear_phase(batch.instance(job[0]["instance_id"]).root)
    for job, report, error in executor.map_unordered(fn, jobs):
        if error is not None:  # the worker itself broke: record it (it is counted), go on with the others
            report = batch.record_error(job[0].get("instance_id"), f"{type(error).__name__}: {error}")
        if progress:
            progress(report)
        clear_phase(batch.instance(job[0]["instance_id"]).root)


def _drive_shipped(batch: BatchDir, executor: Executor, fn, jobs: list, progress: Progress | None,
                   config_data: dict | None = None) -> None:
    """Record each instance's result once, here; a result that arrives twice (a retried task that
    had finished after all, a straggler of a killed driver) is noticed and dropped. Trajectories
    that come back go into the store of `config_data`."""
    seen: set[str] = set()
    for job, shipped, error in executor.map_unordered(fn, jobs):
        instance_id = job[0]["instance_id"]
        if instance_id in seen:
            _say(instance_id, "a second result arrived: ignored (the first one is recorded)")
            continue
        seen.add(instance_id)
        if error is not None:  # Ray's errors run to many lines: the first says what happened
            first = (str(error).strip().splitlines() or [""])[0][:500]
            report = batch.record_error(instance_id, f"{type(error).__name__}: {first}")
        else:
            report = {**shipped["report"], **({"executor": shipped["executor"]} if "executor" in shipped else {})}
            state = batch.instance(instance_id)
            if shipped.get("trajectories") and state.report() is None:
                _store_trajectories(config_data or {}, shipped["trajectories"])
            if shipped.get("prediction") is not None and state.prediction() is None:
                write_json_atomic(state.prediction_path, shipped["prediction"])
            try:
                fresh = batch.record_result(instance_id, report, shipped.get("files"))
            except ValueError as exc:  # a result that cannot be recorded is this instance's error, not the batch's
                report, fresh = batch.record_error(instance_id, str(exc)), True
            if not fresh:
                _say(instance_id, "already graded (by another run): this result is ignored")
                report = cast(dict, batch.instance(instance_id).report())  # the other run's, recorded
        if progress:
            progress(report)


def _store_trajectories(config_data: dict, trajectories: dict[str, bytes]) -> None:
    """Trajectories made on another node, into this machine's store (an id must be a valid one, and
    one already there is kept)."""
    import os

    from ..config import Config
    from ..trajectory.store import TrajectoryError, TrajectoryStore

    store = TrajectoryStore(Config.model_validate(config_data).trajectory_root())
    for trajectory_id, data in trajectories.items():
        try:
            path = store.path_for(trajectory_id)
        except TrajectoryError as exc:
            _say("-", f"a shipped trajectory is refused: {exc}")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_bytes(data)
        try:
            os.link(temporary, path)  # never over an existing trajectory
        except FileExistsError:
            _say(trajectory_id, "this trajectory is already in the store: the shipped copy is ignored")
        finally:
            temporary.unlink()


def summarize(reports: list[dict], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    per_repo: dict[str, dict[str, int]] = {}
    outcomes: dict[str, int] = {}
    for report in reports:
        repo = report["instance_id"].rsplit("-", 1)[0].replace("__", "/", 1)  # SWE-bench's owner__name: owner/name
        row = per_repo.setdefault(repo, {"total": 0, "resolved": 0, "errors": 0})
        row["total"] += 1
        row["resolved"] += bool(report.get("resolved"))
        row["errors"] += is_error(report)
        outcomes[report.get("outcome", "?")] = outcomes.get(report.get("outcome", "?"), 0) + 1
    resolved = sum(bool(r.get("resolved")) for r in reports)
    errors = sorted(r["instance_id"] for r in reports if is_error(r))
    scaled = [r["scaling"] for r in reports if r.get("scaling")]
    if scaled:  # test-time scaling: Pass@1 (mean), Pass@N (oracle), Best@N per selection policy
        policies = sorted({policy for s in scaled for policy in s["best_at_n"]})
        extra = {**(extra or {}), "scaling": {
            "pass_at_1": round(sum(s["pass_at_1"] for s in scaled) / len(scaled), 4),
            "pass_at_n": sum(bool(s["pass_at_n"]) for s in scaled),
            "best_at_n": {policy: sum(bool(s["best_at_n"].get(policy)) for s in scaled) for policy in policies}}}
    return {"instances": len(reports), "resolved": resolved,
            "resolved_percent": round(100 * resolved / len(reports), 2) if reports else 0.0,
            "errors": len(errors), "error_instances": errors, "outcomes": outcomes,
            "per_repo": dict(sorted(per_repo.items())),
            "python_fallbacks": sorted(r["instance_id"] for r in reports if r.get("python_fallback")),
            "touches_test_infrastructure": sorted(r["instance_id"] for r in reports
                                                  if r.get("touches_test_infrastructure")),
            "tamper_evidence": sorted(r["instance_id"] for r in reports if r.get("tamper_evidence")),
            "tried_network": sorted(r["instance_id"] for r in reports if (r.get("network") or {}).get("tried_network")),
            **(extra or {})}


def solve_task(task: Task, config_data: dict, instance_dir: Path) -> dict:
    """Run the agent (or config.scaling.candidates of them, one selected) on a task, in sandboxes
    of its instance image: the prediction."""
    from ..config import Config
    from ..harness.env_sandbox import agent_sandboxes
    from ..models import model_from_settings
    from ..run.solve import solve
    from ..sandbox import Limits
    from ..sandbox.errors import CloneFailed

    config = Config.model_validate(config_data)
    try:  # the agent works without the task's service sidecars (only its tests get them)
        sandboxes = agent_sandboxes(task, limits=Limits.from_settings(config.sandbox), services=False,
                                    log_dir=instance_dir, phase=lambda text: set_phase(instance_dir, text))
    except CloneFailed as exc:
        raise CloneFailed(f"{OFFLINE_HINT}. {_first_line(exc)}") from None
    set_phase(instance_dir, "running the agent")
    model = model_from_settings(config.model)
    agent_task = task.model_copy(update={"test_patch": None, "gold_patch": None, "FAIL_TO_PASS": []})  # never seen
    # with candidates, solve() starts the next sandboxes while the model thinks (a warm pool)
    outcome = solve(agent_task, config, model, localize=False, sandbox_factory=sandboxes.start)
    result = outcome.result
    prediction: dict[str, Any] = {"instance_id": task.instance_id, "model_name_or_path": model.name, "model_patch": result.patch,
                  "trajectory_id": result.trajectory_id or None, "exit_status": result.exit_status,
                  "cost": result.cost, "steps": result.steps, "agent_seconds": round(result.seconds, 2)}
    if outcome.scaling is not None:
        candidates = outcome.scaling.candidates
        prediction.update({"cost": sum(c.details.get("cost") or 0.0 for c in candidates),
                           "selection": outcome.scaling.selection.model_dump(),
                           "candidates": [c.model_dump() for c in candidates]})
    return prediction


def _grade_candidates(task: Task, prediction: dict, instance_dir: Path, config_data: dict) -> dict:
    """Grade every distinct candidate (for Pass@1, Pass@N and each policy's Best@N)."""
    from ..scaling.offline import evaluate
    from ..scaling.types import Candidate

    candidates = [Candidate.model_validate(c) for c in prediction["candidates"]]
    graded: dict[str, dict] = {}
    for candidate in candidates:
        if candidate.patch not in graded:
            graded[candidate.patch] = grade_task(task, candidate.patch, instance_dir / f"candidate-{candidate.index}")
        candidate.resolved = bool(graded[candidate.patch].get("resolved"))
        _record_reward(config_data, candidate.trajectory_id, graded[candidate.patch])
    report = dict(graded.get(prediction["model_patch"]) or grade_task(task, prediction["model_patch"], instance_dir))
    row = evaluate({task.instance_id: candidates})["per_instance"][0]
    report["scaling"] = {"candidates": [{"index": c.index, "resolved": c.resolved, "scores": c.scores,
                                         "exit_status": c.exit_status} for c in candidates],
                         "pass_at_1": row["pass_at_1"], "pass_at_n": row["pass_at_n"],
                         "best_at_n": {policy: entry["resolved"] for policy, entry in row["policies"].items()},
                         "selected_by": prediction.get("selection", {}).get("policy")}
    return report


def _run_one(job: tuple[dict, str, dict]) -> dict:
    task_data, output, config_data = job
    task = Task.model_validate(task_data)
    state = BatchDir(output).instance(task.instance_id)

    def produce() -> dict:
        return solve_task(task, config_data, state.root)

    def grade(prediction: dict) -> dict:
        if "candidates" in prediction:
            report = _grade_candidates(task, prediction, state.root, config_data)
        else:
            report = grade_task(task, prediction["model_patch"], state.root)
            _record_reward(config_data, prediction.get("trajectory_id"), report)
        report.update({key: prediction.get(key) for key in ("trajectory_id", "exit_status", "cost", "steps")})
        return report

    return process_instance(state, produce, grade)


def run_shipped(job: tuple[dict, dict, dict | None]) -> dict:
    """`_run_one` on whichever machine runs this: the agent (unless a prediction is given), then the
    grade, in a scratch directory with a trajectory store of its own. Back come plain data: the
    prediction, the report, the files the grading wrote and the trajectories (their JSONL records)."""
    import tempfile

    task_data, config_data, prediction = job
    task = Task.model_validate(task_data)
    with tempfile.TemporaryDirectory(prefix="codeagent-run-") as scratch:
        root = Path(scratch)
        config_data = {**config_data, "trajectories_dir": str(root / "trajectories")}
        if prediction is None:
            prediction = solve_task(task, config_data, root / "instance")
        if "candidates" in prediction:
            report = _grade_candidates(task, prediction, root / "instance", config_data)
        else:
            report = grade_task(task, prediction["model_patch"], root / "instance")
            _record_reward(config_data, prediction.get("trajectory_id"), report)
        report.update({key: prediction.get(key) for key in ("trajectory_id", "exit_status", "cost", "steps")})
        return {"prediction": prediction, "report": report, "files": collect_files(root / "instance", {PHASE_FILE}),
                "trajectories": {path.stem: path.read_bytes() for path in (root / "trajectories").glob("*.jsonl")}}


def _record_reward(config_data: dict, trajectory_id: str | None, report: dict) -> None:
    """The grade goes back onto the trajectory: verification results and the reward for training."""
    if not trajectory_id:
        return
    from ..config import Config
    from ..harness import reasons
    from ..trajectory.store import TrajectoryStore

    store = TrajectoryStore(Config.model_validate(config_data).trajectory_root())
    distrust = reasons(report)  # the reward is 0 when the grade cannot be trusted
    store.add_verification(trajectory_id, {"resolved": bool(report.get("resolved")), "outcome": report.get("outcome"),
                                           "tests_status": report.get("tests_status"), "distrust": distrust})
    rewarded = report.get("resolved") and not distrust
    store.add_rewards(trajectory_id, {"resolved": 1.0 if rewarded else 0.0})


def run_batch(tasks: list[Task], config_data: dict, output: str | Path, *, executor: Executor | None = None,
              progress: Progress | None = None) -> list[dict]:
    """The agent on every task (resumable), each patch graded; predictions.jsonl in SWE-bench format."""
    ids = [task.instance_id for task in tasks]
    check_distinct_folders(ids)
    batch = BatchDir(output)
    todo = set(batch.pending(ids))
    executor = executor or LocalExecutor()
    if getattr(executor, "ships_results", False):  # the prediction made before a kill is only graded
        jobs = [(task.model_dump(), config_data, batch.instance(task.instance_id).prediction())
                for task in tasks if task.instance_id in todo]
        _drive_shipped(batch, executor, run_shipped, jobs, progress, config_data)
    else:
        jobs = [(task.model_dump(), str(output), config_data) for task in tasks if task.instance_id in todo]
        _drive(batch, executor, _run_one, jobs, progress)
    batch.write_predictions(ids)
    return batch.reports(ids)
