"""The interactive session: one task, one sandbox, one trajectory, many turns.

Plain Python, no Textual: the TUI (tui/) and the editors' ACP server (acp/) are its clients, and it
can be driven (and tested) on its own. A session starts a task from the user's first message, sends
the next ones as follow-ups (queued while the agent runs, read before its next step), asks before
commands and edits as the approval mode says, interrupts, undoes the agent's last change, applies
the patch to the user's working tree, compacts the conversation, samples candidates, and resumes a
saved trajectory in a new sandbox with its patch applied.

Work that touches the sandbox or the model runs in one background thread (worker.py); the methods
called by a client return at once. What happens is reported through `emit`: the agent's own events,
plus those of events.py (`Notice`, `SessionChanged`, `Resumed`, `SamplingStarted`). Limits (steps,
cost) apply per turn: a follow-up gets a fresh budget on top of what was spent. Its parts: the
state (state.py), the sandbox (sandbox_slot.py), approvals (approval.py), one turn (turn.py), the
candidates (candidates.py), /undo and /apply (patch.py), /compact (compact.py), the other jobs
(jobs.py), saved sessions (trajectory/sessions.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...agent.loop import Agent, Approval
from ...config import Config
from ...events import Event, EventBus, RunStarted
from ...models import Model, ToolCall
from ...sandbox import Sandbox, WorkspaceError, snapshot
from ...sandbox.workspace import URL_PATTERN
from ...task import Task
from ...trajectory.sessions import SessionHeader, find_session, recent_sessions
from ...trajectory.store import TrajectoryStore
from ..telemetry import subscribe_telemetry
from . import candidates, compact, jobs, patch
from .approval import ApprovalPolicy, ApprovalRequest, Approver, check_mode
from .approval_rules import SavedRules
from .events import Notice, SessionChanged, Submitted
from .patch import working_tree
from .sandbox_slot import SandboxSlot
from .state import SessionState
from .worker import Worker

KEEP: Any = object()  # submit(only_tools=KEEP): the tools offered stay as they are


class Session:
    def __init__(self, config: Config, model: Model | None, *, repo: str | Path = ".", commit: str | None = None,
                 mode: str = "suggest", store: TrajectoryStore | None = None, replay: bool = False,
                 apply_repo: str | Path | None | bool = True, save_rules: bool | Path = False,
                 ask: Callable[[ApprovalRequest], None] | None = None,
                 emit: Callable[[Event], None] | None = None, write_through: bool | None = None):
        """`apply_repo`: the working tree /apply writes to (True: `repo` when it is a local
        directory; None: none, e.g. a bundled example). `save_rules`: keep "always allow" rules
        for the repository in the user's rule file (True: the default one; a path: that file).
        `ask(request)` shows an approval request; the answer comes back through
        `request.answer(...)` from any thread. `emit(event)` is called from the session's thread.
        `write_through`: each change goes to `apply_repo` as it is made (None: as configured)."""
        self.config = config
        self.model = model
        local = Path(repo).expanduser()
        self.repo = str(local.resolve()) if local.is_dir() else str(repo)  # ".": the directory's own name
        self.commit = commit
        self.replay = replay
        saved = SavedRules(self.repo, None if save_rules is True else save_rules) if save_rules else None
        self.policy = ApprovalPolicy(mode, saved)
        self.approver = Approver(self.policy, ask)
        self.store = store or TrajectoryStore(config.trajectory_root())
        self.apply_default = apply_repo is True  # a resumed task's own repository, when it is the user's
        self.apply_repo = working_tree(self.repo) if apply_repo is True else (str(apply_repo) if apply_repo else None)
        self.emit: Callable[[Event], None] = emit or (lambda event: None)
        events = EventBus(self._on_agent_event)
        subscribe_telemetry(events, warn=lambda text: self.notice(text, "warning"))  # CODEAGENT_ENABLE_TELEMETRY=1
        # interactive: a plain-text reply is an answer, the turn ends, the user replies; keep_tools_open: MCP
        # servers start with the first turn and end with the session
        self.agent = Agent(model, config, events=events, store=self.store,  # type: ignore[arg-type]  # None: /model picks one
                           approver=self._approve, warn=lambda text: self.notice(text, "warning"),
                           interactive=True, keep_tools_open=True)
        self.worker = Worker(on_done=lambda: self.emit(SessionChanged()))
        self.slot = SandboxSlot(config, on_change=lambda: self.emit(SessionChanged()), say=self.notice,
                                warn=lambda text: self.notice(f"warning: {text}", "warning"))
        self.state = SessionState(write_through=config.agent.write_through if write_through is None
                                  else write_through)
        if any(server.enabled for server in config.mcp.servers.values()):  # their prompts are slash commands
            threading.Thread(target=self.agent.open_tools, name="mcp-start", daemon=True).start()

    def connect(self, emit: Callable[[Event], None] | None = None,
                ask: Callable[[ApprovalRequest], None] | None = None) -> None:
        """A client takes the session's events (`emit`) and approval requests (`ask`)."""
        if emit is not None:
            self.emit = emit
        if ask is not None:
            self.approver.ask = ask

    # -- what the clients read -----------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self.worker.busy

    @property
    def mode(self) -> str:
        """The approval mode: suggest | auto-edit | full-auto."""
        return self.policy.mode

    @property
    def work_mode(self) -> str:
        """normal, or plan (read-only tools, answers in text)."""
        return self.agent.mode

    @property
    def task(self) -> Task | None:
        return self.state.task

    @property
    def trajectory_id(self) -> str | None:
        return self.state.trajectory_id

    @property
    def last_status(self) -> str | None:
        return self.state.last_status

    @property
    def patch(self) -> str:
        return self.state.patch

    @property
    def sandbox(self) -> Sandbox | None:
        return self.slot.sandbox

    @property
    def sandbox_state(self) -> str:
        return self.slot.state

    @property
    def model_name(self) -> str:
        return self.model.name if self.model is not None else "(no model)"

    @property
    def patch_file(self) -> str | None:  # written only while there is a patch
        path = self.state.trajectory_path
        return str(Path(path).with_suffix(".patch")) if path else None

    def status(self) -> dict[str, Any]:
        stats = self.state.stats
        return {"model": self.model_name, "steps": stats.steps, "tokens": stats.tokens,
                "cost": stats.cost, "sandbox": self.slot.state, "mode": self.policy.mode, "busy": self.busy,
                "waiting": self.approver.waiting,
                "context": stats.context, "context_limit": self.config.model.context_tokens,
                "plan": self.agent.mode == "plan",
                "trajectory": self.state.trajectory_id, "replay": self.replay}

    def tool_names(self) -> list[str]:
        return self.agent.tools.names()

    def wait_idle(self, timeout: float | None = None) -> bool:
        return self.worker.wait_idle(timeout)

    def find(self, ref: str | None) -> str:
        """A saved session's id: from an id or a unique prefix, or this repository's latest."""
        return find_session(self.store, ref, self.repo)

    def recent(self, limit: int = 10) -> list[SessionHeader]:
        """This repository's latest sessions, newest first."""
        return recent_sessions(self.store, self.repo, limit)

    def recent_details(self, limit: int = 20) -> list[tuple[SessionHeader, int | str, str | None]]:
        """For /resume's picker: each recent session's header, its steps and how it ended."""
        rows: list[tuple[SessionHeader, int | str, str | None]] = []
        for header in self.recent(limit):
            try:
                trajectory = self.store.load(header.id)
                rows.append((header, len(trajectory.steps), trajectory.exit_status))
            except Exception:  # a damaged file: listed, and resuming it says what is wrong
                rows.append((header, "?", "unreadable"))
        return rows

    def mcp_prompts(self) -> list[tuple[str, str, str]]:
        """The MCP servers' prompts as slash commands: (name, arguments, description), once started."""
        servers = self.agent.mcp
        return servers.prompt_commands() if servers is not None else []

    def repo_problem(self) -> str | None:
        """Why the session's folder cannot be worked on (not a git repository, no commit...), found
        before the user types the issue; None when it can, or when it is not a local folder (a URL
        is cloned when the task starts)."""
        if URL_PATTERN.match(self.repo):
            return None
        try:
            if self.commit is None and Path(self.repo).expanduser().is_dir():
                snapshot(self.repo, working_tree=True)  # what the task will start from (outside git too)
            else:
                snapshot(self.repo, self.commit)
        except WorkspaceError as exc:
            return str(exc)
        return None

    # -- commands ------------------------------------------------------------------------------

    def submit(self, text: str, *, only_tools: frozenset[str] | None = KEEP, title: str | None = None) -> Submitted:
        """The user's message: the issue (first), a follow-up after a run, or, while the agent
        runs, an instruction it reads before its next step. `only_tools`: the tools offered from
        now on (a custom command's allowed-tools; None: all), set when the message is taken.
        `title`: what the user typed, when `text` is what it expanded to (`/review a.py`): a session it
        starts is listed by it."""
        text = text.strip()
        if not text:
            return Submitted.IGNORED
        with self.worker.lock:
            if self.worker.closed:
                return Submitted.CLOSED
            queued = not self.worker.claim()
            if only_tools is not KEEP:
                self.agent.offer_only(only_tools)
            if queued:
                self.agent.inbox.put(text)
        if queued:
            return Submitted.QUEUED
        if self.state.task is None:
            self._launch("start", jobs.start, self, Task(repo=self.repo, problem_statement=text, base_commit=self.commit,
                                                         extra={"title": title} if title else {}))
            return Submitted.STARTED
        self._launch("continue", jobs.follow_up, self, text)
        return Submitted.CONTINUED

    def send_prompt(self, command: str, argument: str = "") -> Submitted:
        """`/mcp__server__prompt args`: its server renders it (in the background), and the text is sent
        as the user's message (the first one starts the task). Returns started | busy | closed."""
        with self.worker.lock:
            if self.worker.closed:
                return Submitted.CLOSED
            if not self.worker.claim():
                return Submitted.BUSY
        self._launch("prompt", jobs.send_prompt, self, command, argument)
        return Submitted.STARTED

    def start(self, task: Task) -> bool:
        """Start a task given up front (--issue, --example)."""
        with self.worker.lock:
            if self.state.task is not None or not self.worker.claim():
                return False
        self._launch("start", jobs.start, self, task)
        return True

    def resume(self, ref: str | None = None, follow_up: str | None = None) -> str:
        """Reopen a saved trajectory (an id, a prefix, or None/"last": this repository's latest) in
        a new sandbox with its patch applied; `follow_up` continues it at once. Returns its id;
        raises TrajectoryError when there is none, RuntimeError while busy."""
        trajectory_id = self.find(ref)
        if not self.worker.claim():
            raise RuntimeError("the agent is running: interrupt it (Ctrl-C) first")
        self._launch("resume", jobs.resume, self, trajectory_id, follow_up)
        return trajectory_id

    def interrupt(self) -> bool:
        """Stop the running step (the command in flight is killed); True if something ran."""
        was_busy = self.worker.busy
        self.worker.stop.set()
        self.agent.interrupt()
        self.approver.deny_pending("the user interrupted the run")
        return was_busy

    def undo(self) -> bool:
        """Revert the agent's last change to the patch (its last step that edited files)."""
        why_not = patch.nothing_to_undo(self.state)
        if why_not:
            self.notice(why_not, "warning")
            return False
        return self._try_launch("/undo", patch.undo, self)

    def apply(self, target: str | Path | None = None) -> bool:
        """Apply the patch to a working tree (default: the user's), refusing to overwrite local
        changes; the outcome comes as a Notice."""
        target = str(target) if target else self.apply_repo
        if target is None:
            where = f" It is in {self.patch_file}." if self.patch_file else ""
            self.notice("/apply: this task's repository is not a working tree of yours (a bundled example or a "
                        f"URL). Give a path: /apply PATH.{where}", "warning")
            return False
        return self._try_launch("/apply", patch.apply, self, target)

    def compact(self) -> bool:
        """Replace the conversation so far by a summary the model writes (compact.py)."""
        return self._try_launch("/compact", compact.compact, self)

    def pick_candidate(self, index: int) -> bool:
        """Make candidate `index` the session's run and patch (candidates.pick)."""
        return self._try_launch("/candidates pick", candidates.pick, self, index)

    def more_candidates(self) -> bool:
        """Have the candidates' method go on from where it stopped with another budget (candidates.run_candidates)."""
        return self._try_launch("/candidates more", candidates.run_candidates, self, True)

    def clear(self) -> bool:
        """Forget the current task and close its sandbox; the next message starts a new task."""
        return self._try_launch("/clear", jobs.clear, self)

    def set_mode(self, mode: str) -> None:
        """The approval mode (ValueError for an unknown one)."""
        self.policy.mode = check_mode(mode)
        self.emit(SessionChanged())

    def set_work_mode(self, mode: str) -> None:
        """normal or plan: told to the model with its next step (ValueError for another word)."""
        if mode not in ("normal", "plan"):
            raise ValueError(f"unknown work mode {mode!r}: normal or plan")
        self.agent.set_mode("plan" if mode == "plan" else "normal")

    def make_model(self, name: str, api_base: str | None = None) -> Model:
        """The model `/model NAME [--api-base URL]` asks for (not checked, not used yet); without a
        server, the configured one. Raises ModelConfigError for a bad spec."""
        from ...models import model_from_settings

        settings = self.config.model.model_copy(update={"name": name, **({"api_base": api_base} if api_base else {})})
        return model_from_settings(settings)

    def set_model(self, model: Model | str) -> None:
        """Switch model (from the next step on); the session's trajectory records it, so a resume goes
        on with it. A name is made into a model first (ModelConfigError for a bad spec)."""
        if isinstance(model, str):
            model = self.make_model(model)
        self.model = model
        self.agent.use_model(model)
        self.replay = model.name.startswith("replay:")
        api_base = getattr(model, "api_base", None)
        self.config = self.config.model_copy(update={"model": self.config.model.model_copy(
            update={"name": model.name, "api_base": api_base if isinstance(api_base, str) else None})})
        self.emit(SessionChanged())

    def close(self, wait: float = 3.0) -> None:
        """Stop the agent and remove the sandbox. Waits a little for the agent's thread (longer
        while a sandbox is being created, so that it is removed and not leaked)."""
        with self.worker.lock:
            self.worker.closed = self.approver.closed = self.slot.closed = True
        self.interrupt()
        if not self.worker.wait_idle(wait) and self.slot.opening:
            self.worker.wait_idle(120)
        self.slot.drop("closed")
        self.agent.close()

    # -- the background thread -----------------------------------------------------------------

    def _try_launch(self, command: str, work: Callable[..., None], *args: Any) -> bool:
        """A command's job, unless one runs (then the user is told to wait)."""
        if not self.worker.claim():
            self.notice(f"{command}: wait until the agent stops (Ctrl-C interrupts it).", "warning")
            return False
        self._launch(command.lstrip("/"), work, *args)
        return True

    def _launch(self, name: str, work: Callable[..., None], *args: Any) -> None:
        self.emit(SessionChanged())
        self.worker.launch(name, jobs.run_job, self, work, args)

    # -- the agent's hooks (its thread) --------------------------------------------------------

    def _approve(self, call: ToolCall, force: bool = False) -> Approval:
        sandbox = self.slot.sandbox
        return self.approver(call, read_file=sandbox.read_file if sandbox is not None else None, force=force)

    def _on_agent_event(self, event: Event) -> None:
        state = self.state
        state.stats.observe(event)
        if state.scaling:  # candidates: their tokens and cost count; the selected one sets the rest
            if isinstance(event, RunStarted):
                state.candidate_runs.add(event.run_id)
        elif isinstance(event, RunStarted):
            state.set_run(event.run_id, str(self.store.path_for(event.run_id)))
        else:
            before = state.patch
            state.history.observe(event, state.stats.steps)
            if state.write_through and state.patch != before:
                patch.write_through(self, state.patch)
        self.emit(event)

    def notice(self, text: str, level: str = "info") -> None:
        self.emit(Notice(run_id=self.state.trajectory_id or "", text=text, level=level))
