"""The interactive session behind the TUI: one task, one sandbox, one trajectory, many turns.

Plain Python, no Textual, so it can be tested (and used) on its own. A session starts a task from
the user's first message, sends the next ones as follow-ups (queued while the agent runs, read
before its next step), asks before commands and edits as the approval mode says, interrupts,
undoes the agent's last change, applies the patch to the user's working tree, and resumes a saved
trajectory in a new sandbox with its patch applied.

Work that touches the sandbox or the model runs in one background thread (worker.py); the methods
called by the UI return at once. What happens is reported through `emit`: the agent's own events,
plus `Notice`, `SessionChanged` and `Resumed`. Limits (steps, cost) apply per turn: a follow-up
gets a fresh budget on top of what was spent. Its parts: the sandbox (sandbox_slot.py), approvals
(approval.py), one turn of the agent (session_turn.py), /undo and /apply (session_patch.py), what
it spent and the patch history for /undo (data/), saved sessions (trajectory/sessions.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..agent.loop import Agent, Approval
from ..config import Config
from ..events import Event, EventBus, PatchChanged, RunStarted
from ..models import Model, ToolCall
from ..models.tokens import estimate_tokens
from ..run.solve import start_from_working_tree
from ..run.telemetry import subscribe_telemetry
from ..sandbox import SandboxError, WorkspaceError, snapshot
from ..sandbox.workspace import URL_PATTERN
from ..status import LIMITS, ExitStatus
from ..task import Task
from ..trajectory.sessions import SessionHeader, find_session, recent_sessions
from ..trajectory.store import TrajectoryStore
from . import session_compact, session_patch, session_turn
from .approval import ApprovalPolicy, ApprovalRequest, Approver, check_mode
from .approval_rules import SavedRules
from .data.patch_history import PatchHistory
from .data.stats import Stats
from .sandbox_slot import SandboxSlot
from .session_events import Notice, Resumed, SessionChanged
from .session_patch import working_tree
from .worker import Worker

CONTINUE_AFTER = (ExitStatus.SUBMITTED, ExitStatus.EMPTY_SUBMISSION, ExitStatus.ANSWERED, *LIMITS)  # a queued message then runs on its own


class Session:
    def __init__(self, config: Config, model: Model | None, *, repo: str | Path = ".", commit: str | None = None,
                 mode: str = "suggest", store: TrajectoryStore | None = None, replay: bool = False,
                 apply_repo: str | Path | None | bool = True, save_rules: bool | Path = False,
                 ask: Callable[[ApprovalRequest], None] | None = None,
                 emit: Callable[[Event], None] | None = None):
        """`apply_repo`: the working tree /apply writes to (True: `repo` when it is a local
        directory; None: none, e.g. a bundled example). `save_rules`: keep "always allow" rules
        for the repository in the user's rule file (True: the default one; a path: that file).
        `ask(request)` shows an approval request; the answer comes back through
        `request.answer(...)` from any thread. `emit(event)` is called from the session's thread."""
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
        self._apply_default = apply_repo is True
        self.apply_repo = working_tree(self.repo) if apply_repo is True else (str(apply_repo) if apply_repo else None)
        self.emit = emit or (lambda event: None)
        events = EventBus(self._on_agent_event)
        subscribe_telemetry(events, warn=lambda text: self.notice(text, "warning"))  # CODEAGENT_ENABLE_TELEMETRY=1
        self.agent = Agent(model, config, events=events, store=self.store,  # type: ignore[arg-type]  # None: /model picks one
                           approver=self._approve, warn=lambda text: self.notice(text, "warning"))
        self.agent.interactive = True  # a plain-text reply is an answer: the turn ends, the user replies
        self.agent.keep_tools_open = True  # MCP servers start with the first turn and end with the session
        self.worker = Worker(on_done=lambda: self.emit(SessionChanged()))
        self.slot = SandboxSlot(config, on_change=lambda: self.emit(SessionChanged()))
        self.task: Task | None = None
        self.trajectory_id: str | None = None
        self.trajectory_path: str | None = None
        self.history = PatchHistory()
        self.write_through = config.agent.write_through  # each change goes to apply_repo as it is made
        self._reset()  # stats, notes (told to the model with the next message, e.g. an undo), applied
        self.last_status: str | None = None
        self.scaling = False  # sampling several candidates (config.scaling.candidates > 1), first turn only
        self.candidate_runs: set[str] = set()  # their run ids (the UI shows one of them live)
        self.candidates: dict = {}  # index -> scaling Candidate (its patch, scores), once they are scored
        self.ran_agent = False
        if any(server.enabled for server in config.mcp.servers.values()):  # their prompts are slash commands
            threading.Thread(target=self.agent.open_tools, name="mcp-start", daemon=True).start()

    # -- what the UI reads ---------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self.worker.busy

    @property
    def mode(self) -> str:
        return self.policy.mode

    @property
    def patch(self) -> str:
        return self.history.current

    @property
    def sandbox(self):
        return self.slot.sandbox

    @property
    def sandbox_state(self) -> str:
        return self.slot.state

    @property
    def model_name(self) -> str:
        return self.model.name if self.model is not None else "(no model)"

    @property
    def patch_file(self) -> str | None:  # written only while there is a patch
        return str(Path(self.trajectory_path).with_suffix(".patch")) if self.trajectory_path else None

    def status(self) -> dict[str, Any]:
        return {"model": self.model_name, "steps": self.stats.steps, "tokens": self.stats.tokens,
                "cost": self.stats.cost, "sandbox": self.slot.state, "mode": self.policy.mode, "busy": self.busy,
                "waiting": self.approver.waiting,
                "context": self.stats.context, "context_limit": self.config.model.context_tokens,
                "plan": self.agent.mode == "plan",
                "trajectory": self.trajectory_id, "replay": self.replay}

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
        rows = []
        for header in self.recent(limit):
            try:
                trajectory = self.store.load(header.id)
                steps, status = len(trajectory.steps), trajectory.exit_status
            except Exception:  # a damaged file: listed, and resuming it says what is wrong
                steps, status = "?", "unreadable"
            rows.append((header, steps, status))
        return rows

    # -- commands ------------------------------------------------------------------------------

    def submit(self, text: str) -> str:
        """The user's message: the issue (first), a follow-up after a run, or, while the agent
        runs, an instruction it reads before its next step. Returns started | continued | queued."""
        text = text.strip()
        if not text:
            return "ignored"
        with self.worker.lock:
            if self.worker.closed:
                return "closed"
            queued = not self.worker.claim()
            if queued:
                self.agent.inbox.put(text)
        if queued:
            return "queued"
        if self.task is None:
            self._launch("start", self._start, Task(repo=self.repo, problem_statement=text, base_commit=self.commit))
            return "started"
        self._launch("continue", session_turn.run_agent, self, text)
        return "continued"

    def mcp_prompts(self) -> list[tuple[str, str, str]]:
        """The MCP servers' prompts as slash commands: (name, arguments, description), once started."""
        servers = self.agent.mcp
        return servers.prompt_commands() if servers is not None else []

    def send_prompt(self, command: str, argument: str = "") -> str:
        """`/mcp__server__prompt args`: its server renders it (in the background), and the text is sent
        as the user's message (the first one starts the task). Returns started | busy | closed."""
        with self.worker.lock:
            if self.worker.closed:
                return "closed"
            if not self.worker.claim():
                return "busy"
        self._launch("prompt", self._send_prompt, command, argument)
        return "started"

    def _send_prompt(self, command: str, argument: str) -> None:
        servers = self.agent.open_tools()
        try:
            if servers is None:
                raise ValueError("no MCP server is configured")
            text = servers.render_prompt(command, argument)
        except ValueError as exc:
            self.notice(f"/{command}: {exc}", "warning")
            return
        self.notice(f"/{command}: the server's prompt, sent as your message:\n{text}")
        if self.task is None:
            self._start(Task(repo=self.repo, problem_statement=text, base_commit=self.commit))
        else:
            session_turn.run_agent(self, text)

    def start(self, task: Task) -> bool:
        """Start a task given up front (--issue, --example)."""
        with self.worker.lock:
            if self.task is not None or not self.worker.claim():
                return False
        self._launch("start", self._start, task)
        return True

    def resume(self, ref: str | None = None, follow_up: str | None = None) -> str:
        """Reopen a saved trajectory (an id, a prefix, or None/"last": this repository's latest) in
        a new sandbox with its patch applied; `follow_up` continues it at once. Returns its id;
        raises TrajectoryError when there is none, RuntimeError while busy."""
        trajectory_id = self.find(ref)
        if not self.worker.claim():
            raise RuntimeError("the agent is running: interrupt it (Ctrl-C) first")
        self._launch("resume", self._resume, trajectory_id, follow_up)
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
        why_not = session_patch.nothing_to_undo(self)
        if why_not:
            self.notice(why_not, "warning")
            return False
        return self._try_launch("/undo", session_patch.undo, self)

    def apply(self, target: str | Path | None = None) -> bool:
        """Apply the patch to a working tree (default: the user's), refusing to overwrite local
        changes; the outcome comes as a Notice."""
        target = str(target) if target else self.apply_repo
        if target is None:
            where = f" It is in {self.patch_file}." if self.patch_file else ""
            self.notice("/apply: this task's repository is not a working tree of yours (a bundled example or a "
                        f"URL). Give a path: /apply PATH.{where}", "warning")
            return False
        return self._try_launch("/apply", session_patch.apply, self, target)

    def compact(self) -> bool:
        """Replace the conversation so far by a summary the model writes (session_compact.py)."""
        return self._try_launch("/compact", session_compact.compact, self)

    def pick_candidate(self, index: int) -> bool:
        """Make candidate `index` the session's run and patch (session_turn.pick)."""
        return self._try_launch("/candidates pick", session_turn.pick, self, index)

    def clear(self) -> bool:
        """Forget the current task and close its sandbox; the next message starts a new task."""
        return self._try_launch("/clear", self._clear)

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

    def set_mode(self, mode: str) -> None:
        self.policy.mode = check_mode(mode)
        self.emit(SessionChanged())

    def make_model(self, name: str, api_base: str | None = None) -> Model:
        """The model `/model NAME [--api-base URL]` asks for (not checked, not used yet); without a
        server, the configured one. Raises ModelConfigError for a bad spec."""
        from ..models import model_from_settings

        settings = self.config.model.model_copy(update={"name": name, **({"api_base": api_base} if api_base else {})})
        return model_from_settings(settings)

    def set_model(self, model: Model | str) -> None:
        """Switch model (from the next step on); the session's trajectory records it, so a resume goes
        on with it. A name is made into a model first (ModelConfigError for a bad spec)."""
        if isinstance(model, str):
            model = self.make_model(model)
        self.model = self.agent.model = model
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

    def _try_launch(self, command: str, work: Callable, *args) -> bool:
        """A command's job, unless one runs (then the user is told to wait)."""
        if not self.worker.claim():
            self.notice(f"{command}: wait until the agent stops (Ctrl-C interrupts it).", "warning")
            return False
        self._launch(command.lstrip("/"), work, *args)
        return True

    def _launch(self, name: str, work: Callable, *args) -> None:
        self.emit(SessionChanged())
        self.worker.launch(name, self._job, work, args)

    def _job(self, work: Callable, args: tuple) -> None:
        self.ran_agent = False
        try:
            work(*args)
            # messages sent while this job ran and no agent read them (a sandbox starting, a run
            # that ended first): they start the next turn
            while (self.task is not None and not self.worker.closed and not self.worker.stop.is_set()
                   and not self.agent.inbox.empty() and (not self.ran_agent or self.last_status in CONTINUE_AFTER)):
                self.notice("Continuing with your message.")
                self.ran_agent = False
                session_turn.run_agent(self)
                if not self.ran_agent:  # it could not run (no model...): it said why
                    break
        except WorkspaceError as exc:  # the repository, not Docker
            self.slot.set_state("failed")
            self.notice(f"{exc}\nFix that, then send a message to try again.", "error")
        except SandboxError as exc:
            self.slot.set_state("failed")
            self.notice(f"The sandbox failed: {exc}\nFix that, then send a message to try again "
                        "(`codeagent sandbox build` makes the image; is Docker running?).", "error")
        except Exception as exc:  # a bug or an environment problem: say it, keep the app alive
            self.notice(f"{type(exc).__name__}: {exc}", "error")

    def _reset(self, stats: Stats | None = None, patch: str = "") -> None:
        """A new task or a reopened one: its counts, its patch (nothing to undo), no notes."""
        self.stats, self.notes = stats or Stats(), list[str]()
        self.applied: tuple[str, str] | None = None  # where /apply (or write-through) last wrote, and which patch
        self.resumed_patch = patch or None  # a reopened session's patch: perhaps applied in an earlier process
        self.compaction: session_compact.Compaction | None = None  # /compact's view of the conversation
        self.history.reset(patch)

    def _start(self, task: Task) -> None:
        started_from = None
        if self.apply_repo is not None:  # the user's own folder: start from what they see in it
            task, started_from = start_from_working_tree(task)
        snap = snapshot(task.repo, task.base_commit)
        self.task = task.model_copy(update={"base_commit": snap.commit})  # resume finds the same base
        if started_from:
            self.notice(started_from[0].upper() + started_from[1:] + ".")
        self.trajectory_id = self.trajectory_path = None
        self._reset()
        session_turn.solve(self)

    # -- the other jobs ------------------------------------------------------------------------

    def _resume(self, trajectory_id: str, follow_up: str | None) -> None:
        trajectory = self.store.load(trajectory_id)
        self.slot.drop("none")
        self.task = Task(**trajectory.task)
        if self._apply_default:
            self.apply_repo = working_tree(self.task.repo)
        self.trajectory_id = trajectory.id
        self.trajectory_path = str(self.store.path_for(trajectory.id))
        self._reset(Stats.from_totals(trajectory.totals), trajectory.patch or "")
        self.stats.context = estimate_tokens(trajectory.messages)
        self.last_status = trajectory.exit_status
        self.emit(Resumed(run_id=trajectory.id, trajectory=trajectory))
        self.slot.open(self.task, trajectory.patch or "")
        self.notice(f"Resumed session {trajectory.id} in a new sandbox with its patch applied. "
                    "Type a message to continue it.", "success")
        if follow_up:
            session_turn.run_agent(self, follow_up)

    def _clear(self) -> None:
        previous = self.trajectory_id
        self.slot.drop("none")
        self.task = self.trajectory_id = self.trajectory_path = self.last_status = None
        self.candidates = {}
        self._reset()
        while not self.agent.inbox.empty():
            self.agent.inbox.get_nowait()
        self.emit(PatchChanged(patch=""))
        saved = f" The last session is saved: /resume {previous}" if previous else ""
        self.notice("Cleared. Describe the next issue." + saved)

    # -- the agent's hooks (its thread) --------------------------------------------------------

    def _approve(self, call: ToolCall, force: bool = False) -> Approval:
        sandbox = self.slot.sandbox
        return self.approver(call, read_file=sandbox.read_file if sandbox is not None else None, force=force)

    def _on_agent_event(self, event: Event) -> None:
        self.stats.observe(event)
        if self.scaling:  # candidates: their tokens and cost count; the selected one sets the rest
            if isinstance(event, RunStarted):
                self.candidate_runs.add(event.run_id)
        elif isinstance(event, RunStarted):
            self.trajectory_id = event.run_id
            self.trajectory_path = str(self.store.path_for(event.run_id))
        else:
            before = self.history.current
            self.history.observe(event, self.stats.steps)
            if self.write_through and self.history.current != before:
                session_patch.write_through(self, self.history.current)
        self.emit(event)

    def notice(self, text: str, level: str = "info") -> None:
        self.emit(Notice(run_id=self.trajectory_id or "", text=text, level=level))
