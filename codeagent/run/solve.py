"""Solving a task for any front end (CLI, TUI, eval): config, model, sandbox, localization, one agent run
or N candidates (the one rule: `samples_candidates`), the patch file; and finding a session to resume."""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass
from pathlib import Path

from .. import patches
from ..agent.loop import Agent, RunResult
from ..config import Config
from ..events import EventBus
from ..models import Model, ModelConfigError, ReplayModel, ScriptedModel, make_model, model_from_settings
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


def resolve_model(config: Config, example: str | None) -> tuple[Model, bool]:
    """The configured model; with none configured, the example's recorded trajectory (replay)."""
    if config.model.name:
        model = model_from_settings(config.model)
        return model, config.model.name.startswith("replay:")
    if example:
        from .examples import example_replay

        return make_model(f"replay:{example_replay(example)}"), True
    raise ModelConfigError(
        "no model configured: pass --model (e.g. --model gpt-4o, --model anthropic/claude-sonnet-4-20250514, "
        "or --model hosted_vllm/NAME --api-base http://localhost:8000/v1), or set model.name in "
        "~/.config/codeagent/config.yaml (or a trusted repository's .codeagent.yaml). The provider's key comes from "
        "its usual variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...)."
    )


def preflight(model: Model, paid: bool = False) -> None:
    """Raise ModelConfigError if the model cannot be used as configured (e.g. its API key is not
    set, a server does not serve it), ModelUnavailable if its server is not there: asked before any
    sandbox is built, not found out after. `paid`: also one cheap completion for a model with no
    api_base (`/model` asks it; a run does not pay for it)."""
    probe, check = getattr(model, "probe", None), getattr(model, "check", None)
    if callable(probe):
        probe(paid=paid)  # the configuration's check included
    elif callable(check):
        check()


MODEL_CHECK_THREAD = "codeagent-model-check"


def model_check_running() -> bool:
    """A model check is still going (its client's import): the process must not be torn down under it."""
    return any(thread.name == MODEL_CHECK_THREAD and thread.is_alive() for thread in threading.enumerate())


class ModelCheck:
    """`preflight(model)` in a thread of its own, started as soon as the model is known: the model client's
    import (litellm: seconds) and the check overlap the sandbox's start. `wait()` gives its error, if any, in
    the caller's thread (Ctrl-C still lands there: the waiting is interruptible)."""

    def __init__(self, model: Model):
        self._error: BaseException | None = None
        if callable(start_light := getattr(model, "start_light", None)):
            start_light()  # a served model's first request need not wait for its client's import
        self._thread = threading.Thread(target=self._check, args=(model,), name=MODEL_CHECK_THREAD,
                                        daemon=True)  # a Ctrl-C exit does not wait for an import
        self._thread.start()

    def _check(self, model: Model) -> None:
        try:
            preflight(model)
        except BaseException as error:  # noqa: BLE001 - handed to the caller by wait()
            self._error = error

    def wait(self) -> None:
        while self._thread.is_alive():
            self._thread.join(0.05)  # short waits: a signal's handler runs between them
        if self._error is not None:
            error, self._error = self._error, None
            raise error


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
          answers: bool = False, check: ModelCheck | None = None, budget: Budget | None = None) -> SolveOutcome:
    """Solve the task: one agent run, or config.scaling.candidates runs verified and one selected.
    `sandbox_factory` opens each sandbox (default: from config.sandbox on the task's repository);
    with candidates, through a warm pool of it. `answers`: someone reads the reply (`solve`, not a
    batch): one run's plain reply without a tool call is an answer (`answered`), not a format error.
    `check`: the model's check, started earlier (default: started now); the first sandbox starts while it
    runs, and is removed if the check fails. `budget`: the candidates' (default: from config.scaling);
    `budget.stop()` from another thread ends the method early."""
    events = events or EventBus()
    check = check or ModelCheck(model)
    if sandbox_factory is None:
        snap, options = snapshot(task.repo, task.base_commit), sandbox_options(config.sandbox)
        sandbox_factory = lambda: open_sandbox(snap, **options)  # noqa: E731
    if samples_candidates(config, resume):
        # the next sandboxes start while the model thinks (the engine's start is the cost); the ones
        # nobody took (candidates and verifiers done) are removed on the way out
        with WarmPool(sandbox_factory, ready=min(max(config.scaling.candidates, 2), config.scaling.max_parallel)) as pool:
            hint = localization_hint(task, config) if localize else ""
            check.wait()
            return _solve_candidates(task, config, model, events, pool, replay=replay, localization=hint,
                                     budget=budget)
    hint = localization_hint(task, config) if localize and resume is None else ""
    return _solve_one(task, config, model, events, sandbox_factory, replay=replay, resume=resume,
                      follow_up=follow_up, localization=hint, answers=answers, check=check)


def _solve_one(task: Task, config: Config, model: Model, events: EventBus, sandbox_factory: SandboxFactory, *,
               replay: bool, resume: Trajectory | None, follow_up: str | None, localization: str,
               answers: bool = False, check: ModelCheck | None = None, budget: Budget | None = None) -> SolveOutcome:
    """One agent run in a new sandbox; with `resume`, that session continues: its patch is applied
    in the new sandbox first and `follow_up` is the next user turn."""
    agent = Agent(model, config, events=events)
    agent.interactive = answers
    with sandbox_factory() as sandbox:
        if check is not None:
            check.wait()
        if resume is not None:
            restore_patch(sandbox, resume.patch or "")
        result = agent.run(task, sandbox, localization=localization, replay=replay, resume=resume,
                           follow_up=follow_up)
    patch_file, moved = keep_patch(Path(result.trajectory_path).with_suffix(".patch"), result.patch)
    return SolveOutcome(result, patch_file, patch_moved=moved)


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
                      budget: Budget | None = None) -> SolveOutcome:
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
                   budget=budget)
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
        except (TrajectoryError, OSError) as error:  # the store could not hold it: the patch is kept all the same
            steps, cost, seconds, lost = 0, 0.0, 0.0, str(error)
        run = RunResult(chosen.exit_status or "", result.selection.why, chosen.patch, steps, cost, seconds,
                        chosen.trajectory_id, str(path), lost)
        patch_file = path.with_suffix(".patch")
    kept, moved = keep_patch(patch_file, run.patch)
    return SolveOutcome(run, kept, result, patch_moved=moved)
