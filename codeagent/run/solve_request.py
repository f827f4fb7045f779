"""What a front end is asked to solve (`SolveRequest`, built once from the command line's flags) and the one
preparation every front end shares (headless `solve`, the TUI, ACP): the session to continue, the config
(the repository's, trusted or not), the session's own model, the model; then the task and its follow-up."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import Config, load_config
from ..models import Model, ModelConfigError
from ..task import Task
from ..trajectory.schema import Trajectory
from .model_check import resolve_model


@dataclass(frozen=True)
class SolveRequest:
    """`codeagent solve`'s flags, read once (cli/solve_command.py), or an editor session's (acp/)."""

    repo: str = "."  # a path (made absolute when local), a mirror or a URL
    overrides: dict[str, Any] = field(default_factory=dict)  # the flags' settings (config.flag_overrides)
    config_file: str | None = None
    trust: bool = False  # the repository's .codeagent.yaml may set everything
    issue_text: str | None = None
    issue_file: str | None = None  # "-": standard input
    example: str | None = None  # a bundled example task instead of an issue
    commit: str | None = None  # None: the working tree as it is
    session: str | None = None  # continue it: a trajectory id (or prefix), or "last"
    images: tuple[str, ...] = ()
    approval_mode: str = "suggest"  # suggest | auto-edit | full-auto
    interactive: bool = False  # the TUI (a terminal, not --headless or --json)
    as_json: bool = False  # headless: one JSON event per line on stdout
    json_deltas: bool = False  # with as_json: also the reply as it forms
    apply_patch: bool = False  # headless: the patch applied to the working tree if safe


@dataclass
class PreparedSolve:
    """What a front end starts from."""

    config: Config
    model: Model | None  # None only where the front end lets the user choose one (the TUI's /model)
    replay: bool  # the model is a recording
    resumed: Trajectory | None = None  # the session continued
    task: Task | None = None  # None: the user types it (the TUI), or a session is continued (the TUI)
    follow_up: str | None = None  # a continued session's next message


def find_resumed(request: SolveRequest) -> Trajectory | None:
    """The session the request continues (ValueError-free: TrajectoryError when there is none such)."""
    if not request.session:
        return None
    from .solve import load_session  # the agent's modules: only to continue a session

    return load_session(load_config(None, None), request.session, request.repo)


def prepare_solve(request: SolveRequest, local: str | None, *, resumed: Trajectory | None = None,
                  task: Task | None = None, follow_up: str | None = None,
                  model_required: bool = True) -> PreparedSolve:
    """The config read for the local repository `local` (None: not a local folder), a continued session's own
    model kept unless the flags name another, and the model (ModelConfigError when there is none, unless
    `model_required` is False)."""
    config = load_config(local, request.config_file, request.overrides, trust=request.trust)
    if resumed is not None:
        from .solve import continue_with_session_model

        continue_with_session_model(config, resumed, request.overrides)
    try:
        model, replay = resolve_model(config, request.example)
    except ModelConfigError:
        if model_required:
            raise
        model, replay = None, False
    return PreparedSolve(config, model, replay, resumed, task, follow_up)
