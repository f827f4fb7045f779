"""Solving a task for any front end (CLI, TUI, eval): config, model, sandbox, localization, one agent run
or N candidates (the one rule: `samples_candidates`), the patch file; and finding a session to resume."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .. import patches
from ..agent.loop import Agent, RunResult
from ..agent.run_types import RunOptions, last_reply_text
from ..config import Config
from ..events import EventBus
from ..models import Model, ReplayModel, ScriptedModel, model_from_settings
from ..sandbox import open_sandbox, sandbox_options, snapshot
from ..sandbox.pool import WarmPool
from ..sandbox.restore import restore_patch
from ..scaling.budget import Budget
from ..scaling.candidates import SandboxFactory
from ..scaling.pipeline import ScalingResult, scale
from ..status import ExitStatus
from ..task import Task
from ..trajectory.schema import Trajectory
from ..trajectory.sessions import find_session
from ..trajectory.store import TrajectoryError, TrajectoryStore
from .history import PreparedHistory, give_history, sealed_history
from .model_check import ModelCheck, model_check_running, preflight, resolve_model
from .skill_mounts import with_skill_folders

if TYPE_CHECKING:
    from ..scaling.methods import Frontier

__all__ = ["ModelCheck", "SolveOutcome", "model_check_running", "preflight", "resolve_model", "solve"]


@dataclass
class SolveOutcome:
    result: RunResult
    patch_file: Path | None  # where the patch is kept (None: no file could hold it; it is in `result`)
    scaling: ScalingResult | None = None  # set when several candidates ran
    patch_moved: str = ""  # why the patch is not next to its trajectory


def write_patch_file(path: str | Path, patch: str) -> bool:
    """The patch next to its trajectory; no file for a run that changed nothing (and a stale one
    goes: an undo back to nothing). True when a file was written. A write that fails leaves no
    cut file behind (an OSError says why)."""
    path = Path(path)
    if not patch.strip():
        path.unlink(missing_ok=True)
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        patches.write(path, patch)
    except OSError:
        path.unlink(missing_ok=True)
        raise
    return True


def keep_patch(path: Path, patch: str) -> tuple[Path | None, str]:
    """Write the patch file at `path`, else (a full or read-only trajectory store) in this user's
    private temporary folder, else in the current directory: (where it is, why not at `path`)."""
    from ..private_dirs import private_root

    try:
        write_patch_file(path, patch)
        return path, ""
    except OSError as error:
        why = f"{error.strerror or error} ({error.filename or path})"
    for folder in (lambda: private_root() / "kept-patches", Path.cwd):
        try:
            where = folder() / path.name
            write_patch_file(where, patch)
            return where, why
        except OSError:
            continue
    return None, why


def start_from_working_tree(task: Task) -> tuple[Task, str | None]:
    """A task on a local folder with no base commit starts from what the user sees: their working
    tree (uncommitted edits and untracked files that are not ignored), or the folder's files outside
    git. Its snapshot's commit becomes the task's base (the patch is the diff against it; a resumed
    session finds it again). Returns the task and the one line that says so (None: nothing done)."""
    if task.base_commit is not None or not Path(task.repo).expanduser().is_dir():
        return task, None
    snap = snapshot(task.repo, working_tree=True)
    return task.model_copy(update={"base_commit": snap.commit}), snap.note


def localization_hint(task: Task, config: Config, k: int = 5) -> str:
    """Ranked candidate files for the first prompt ('' when disabled or nothing is found)."""
    if not config.agent.localize:
        return ""
    from ..code.localize import localize
    from ..sandbox.workspace import host_tree

    tree = host_tree(snapshot(task.repo, task.base_commit))
    candidates = localize(tree, task.problem_statement, k=k)
    lines = []
    for candidate in candidates:
        symbols = ", ".join(symbol.qualname for symbol in candidate.symbols[:3])
        lines.append(f"- {candidate.path}" + (f" ({symbols})" if symbols else ""))
    return "\n".join(lines)


def samples_candidates(config: Config, resume: Trajectory | None = None) -> bool:
    """The one rule every front end follows: several candidates when configured (more than one, a method
    other than sampling, or a token/step budget), except when a session is continued (a follow-up
    continues the one chosen trajectory)."""
    scaling = config.scaling
    wanted = scaling.candidates > 1 or scaling.tts != "sample" or bool(scaling.budget_tokens or scaling.budget_steps)
    return wanted and resume is None


def solve(task: Task, config: Config, model: Model, events: EventBus | None = None, *, replay: bool = False,
          resume: Trajectory | None = None, follow_up: str | None = None,
          sandbox_factory: SandboxFactory | None = None, localize: bool = True,
          answers: bool = False, check: ModelCheck | None = None,
          history: Callable[[str], None] | None = None, budget: Budget | None = None,
          more_of: Frontier | None = None) -> SolveOutcome:
    """Solve the task: one agent run, or config.scaling.candidates runs verified and one selected.
    `sandbox_factory` opens each sandbox (default: from config.sandbox on the task's repository);
    with candidates, through a warm pool of it. `answers`: someone reads the reply (`solve`, not a
    batch): one run's plain reply without a tool call is an answer (`answered`), not a format error.
    `check`: the model's check, started earlier (default: started now); the first sandbox starts while it
    runs, and is removed if the check fails. `history(line)`: one run gets the repository's history in its
    sandbox (run/history.py) and the line says what was given; None (eval, training): sealed. `budget`: the
    candidates' (default: from config.scaling); `budget.stop()` from another thread ends the method early.
    `more_of`: an earlier candidates outcome's frontier (`outcome.scaling.frontier`): its method goes on from
    there under `budget`, and one is selected among the earlier candidates and the new."""
    events = events or EventBus()
    check = check or ModelCheck(model)
    prepared = None
    if sandbox_factory is None:
        snap, options = snapshot(task.repo, task.base_commit), sandbox_options(config.sandbox)
        if history is not None and config.agent.repository_history and not samples_candidates(config, resume):
            prepared = PreparedHistory(snap, task.repo)  # made while the sandbox starts
        if answers:  # a session someone follows uses the skills: their folders go in the sandbox
            options = with_skill_folders(options, config, task.repo)
        sandbox_factory = lambda: open_sandbox(snap, **options)  # noqa: E731
    if samples_candidates(config, resume) and history is not None:
        task = recorded_history(task, {"given": False, "note": "several candidates run sealed (no history)"})
    if samples_candidates(config, resume):
        # the next sandboxes start while the model thinks (the engine's start is the cost); the ones
        # nobody took (candidates and verifiers done) are removed on the way out
        with WarmPool(sandbox_factory, ready=min(max(config.scaling.candidates, 2), config.scaling.max_parallel)) as pool:
            hint = localization_hint(task, config) if localize else ""
            check.wait()
            return _solve_candidates(task, config, model, events, pool, replay=replay, localization=hint,
                                     budget=budget, more_of=more_of)
    hint = localization_hint(task, config) if localize and resume is None else ""
    return _solve_one(task, config, model, events, sandbox_factory, replay=replay, resume=resume,
                      follow_up=follow_up, localization=hint, answers=answers, check=check, history=history,
                      prepared=prepared)


def _solve_one(task: Task, config: Config, model: Model, events: EventBus, sandbox_factory: SandboxFactory, *,
               replay: bool, resume: Trajectory | None, follow_up: str | None, localization: str,
               answers: bool = False, check: ModelCheck | None = None,
               history: Callable[[str], None] | None = None, prepared: PreparedHistory | None = None) -> SolveOutcome:
    """One agent run in a new sandbox; with `resume`, that session continues: its patch is applied
    in the new sandbox first and `follow_up` is the next user turn."""
    agent = Agent(model, config, events=events, interactive=answers)
    with sandbox_factory() as sandbox:
        if check is not None:
            check.wait()
        if history is not None:
            given = sealed_history() if not config.agent.repository_history else prepared.give(sandbox) \
                if prepared is not None else give_history(sandbox, snapshot(task.repo, task.base_commit), task.repo)
            history(given["note"])
            task = recorded_history(task, given)
        if resume is not None:
            restore_patch(sandbox, resume.patch or "")
        result = agent.run(task, sandbox, RunOptions(localization=localization, replay=replay, resume=resume,
                                                     follow_up=follow_up,
                                                     fresh_sandbox=resume is None))  # made from the snapshot
    patch_file, moved = keep_patch(Path(result.trajectory_path).with_suffix(".patch"), result.patch)
    return SolveOutcome(result, patch_file, patch_moved=moved)


def recorded_history(task: Task, given: dict) -> Task:
    """The task as the trajectory records it: with what history its sandbox had (run/history.py)."""
    return task.model_copy(update={"repository_history": given})


def continue_with_session_model(config: Config, session: Trajectory, flags: dict) -> None:
    """A resumed session goes on with its own model at its own server (kept in its trajectory), unless
    the flags (`flag_overrides`) name others: a model alone takes the configured server with it, a
    server alone moves the session's model there. A recording (replay:) is not continued."""
    given = flags.get("model") or {}
    if not session.model or session.model.startswith("replay:") or "name" in given:
        return
    config.model.name = session.model
    if "api_base" not in given:
        config.model.api_base = session.model_api_base


def load_session(config: Config, session: str, repo: str) -> Trajectory:
    """A stored trajectory by id (or unique prefix), or with "last" the repository's latest."""
    store = TrajectoryStore(config.trajectory_root())
    return store.load(find_session(store, session, repo))


def _solve_candidates(task: Task, config: Config, model: Model, events: EventBus,
                      sandbox_factory: SandboxFactory, *, replay: bool, localization: str,
                      budget: Budget | None = None, more_of: Frontier | None = None) -> SolveOutcome:
    """config.scaling.candidates agent runs in parallel sandboxes; verifiers; the chosen patch."""
    if replay:  # a recording cannot write tests or judge: only the test suite verifies
        config = config.model_copy(update={"scaling": config.scaling.model_copy(update={"verifiers": ["regression"]})})

    def build_model(name: str) -> Model:
        if name and name != model.name and not replay:
            return model_from_settings(config.model, name)
        if getattr(model, "remote", False) or isinstance(model, (ReplayModel, ScriptedModel)):
            return copy.deepcopy(model)  # each candidate its own (a recording counts its turns)
        return model  # weights in this process (a local HF model) are shared: it serializes generation

    result = scale(task, config, sandbox_factory, events=events, model_factory=build_model, localization=localization,
                   budget=budget, resume=more_of)
    chosen = result.chosen
    store = TrajectoryStore(config.trajectory_root())
    if chosen is None:
        run = RunResult(ExitStatus.NO_CANDIDATE, result.selection.why, "", 0, 0.0, 0.0, "", "")
        patch_file = store.root / f"{task.instance_id}-no-candidate.patch"
    else:
        assert chosen.trajectory_id is not None  # a usable candidate is a finished, stored run
        path = store.path_for(chosen.trajectory_id)
        try:
            trajectory = store.load(chosen.trajectory_id)
            steps, cost, seconds, lost = (len(trajectory.steps), trajectory.totals.cost or 0.0,
                                          trajectory.totals.wall_seconds or 0.0, "")
            answer = last_reply_text(trajectory.messages)
        except (TrajectoryError, OSError) as error:  # the store could not hold it: the patch is kept all the same
            steps, cost, seconds, lost, answer = 0, 0.0, 0.0, str(error), ""
        run = RunResult(chosen.exit_status or "", result.selection.why, chosen.patch, steps, cost, seconds,
                        chosen.trajectory_id, str(path), lost, answer)
        patch_file = path.with_suffix(".patch")
    kept, moved = keep_patch(patch_file, run.patch)
    return SolveOutcome(run, kept, result, patch_moved=moved)
