"""The ACP agent: each ACP session is a codeagent Session (run/session/) on the editor's folder.

The session works on its own thread and reports through `emit`; events become session updates (updates.py)
handed to the event loop, and an approval the session asks becomes `session/request_permission` (an edit's
diff in it). When the client can write files, each change of the patch is written to the editor's files
through `fs/write_text_file` (editor_files.py); else the patch is handed over. A prompt turn ends when the
session's job is done (its last SessionChanged while idle), with a stop reason. `session/load` replays a
saved session (history.py) and reopens it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import acp
from acp import schema

from .. import __version__
from ..events import Event
from ..run.session import Decision, SessionChanged, Submitted
from ..status import LIMITS, ExitStatus
from .editor_files import EditorFiles, FileWrite
from .history import recall, remember, replay
from .updates import Translator

if TYPE_CHECKING:
    from ..run.session import Session
    from ..run.solve_request import SolveRequest

MODES = {"suggest": "Ask before every command and edit", "auto-edit": "Edits run; ask before commands",
         "full-auto": "Never ask (the sandbox is the guard)"}
END = object()  # the turn's job is done


class Live:
    """One ACP session: the codeagent Session and the turn in flight. `files`: the editor's files, written
    through it (`fs/write_text_file`) when it said it can; None: the patch is handed over instead."""

    def __init__(self, session: Session, cwd: str, writes: bool = False):
        self.session = session
        self.cwd = cwd
        self.turn: asyncio.Queue | None = None  # the running prompt's updates
        self.cancelled = False
        self.translate = Translator(cwd, self._read_file, self._workdir)
        self.files = EditorFiles(cwd, self._workdir, self._read_file) if writes else None

    def _read_file(self, path: str) -> bytes:
        sandbox = self.session.sandbox
        if sandbox is None:
            raise OSError("no sandbox")
        return sandbox.read_file(path, max_bytes=2_000_000)

    def _workdir(self) -> str:
        sandbox = self.session.sandbox
        return sandbox.workdir if sandbox is not None else "/testbed"

    def file_updates(self) -> list:
        """The editor's writes (and what could not be written) for the patch as it is now."""
        if self.files is None:
            return []
        writes, notes = self.files.sync(self.session.patch)
        said = [acp.update_agent_message_text(f"\n[warning] {note}\n") for note in notes]
        return [*writes, *said]


class CodeagentAgent:
    def __init__(self, request: SolveRequest):
        self.request = request  # the command line's: each session's is this one on the editor's folder
        self.sessions: dict[str, Live] = {}
        self.conn: Any = None  # the client's connection (acp), once connected
        self.loop: asyncio.AbstractEventLoop | None = None
        self.client_writes = False  # the client takes fs/write_text_file: edits go to its files

    def on_connect(self, conn) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities=None, client_info=None, **kwargs):
        self.loop = asyncio.get_running_loop()
        fs = getattr(client_capabilities, "fs", None)
        self.client_writes = bool(getattr(fs, "write_text_file", False))
        return schema.InitializeResponse(
            protocol_version=min(protocol_version, acp.PROTOCOL_VERSION),
            agent_capabilities=schema.AgentCapabilities(
                load_session=True, prompt_capabilities=schema.PromptCapabilities(image=False, audio=False,
                                                                                  embedded_context=True),
                session_capabilities=schema.SessionCapabilities(close=schema.SessionCloseCapabilities())),
            agent_info=schema.Implementation(name="codeagent", title="codeagent", version=__version__))

    async def authenticate(self, method_id: str, **kwargs):
        return schema.AuthenticateResponse()

    async def new_session(self, cwd: str, mcp_servers=None, **kwargs):
        self.loop = asyncio.get_running_loop()
        _check_folder(cwd)
        session_id = uuid.uuid4().hex
        live = await asyncio.to_thread(self._open, session_id, cwd)  # reads the config and the repository
        self.sessions[session_id] = live
        return schema.NewSessionResponse(session_id=session_id, modes=_modes(live))

    async def load_session(self, cwd: str, session_id: str, mcp_servers=None, **kwargs):
        """A saved session again (`session/load`): its conversation replayed to the editor, then the session
        reopened in a new sandbox with its patch applied; the next prompt continues it."""
        from ..trajectory.store import TrajectoryError

        self.loop = asyncio.get_running_loop()
        _check_folder(cwd)
        live = await asyncio.to_thread(self._open, session_id, cwd)
        store = live.session.store
        try:
            trajectory = await asyncio.to_thread(store.load, recall(store.root, session_id))
        except (TrajectoryError, OSError) as exc:
            await asyncio.to_thread(live.session.close)
            raise acp.RequestError.invalid_params({"sessionId": f"no saved session {session_id}: {exc}"}) from None
        if os.path.realpath(str((trajectory.task or {}).get("repo", ""))) != os.path.realpath(live.session.repo):
            await asyncio.to_thread(live.session.close)
            raise acp.RequestError.invalid_params({"sessionId": f"session {session_id} is not one of {cwd}"})
        for update in replay(trajectory, live.translate):
            await self.conn.session_update(session_id=session_id, update=update)
        live.session.resume(trajectory.id)
        await asyncio.to_thread(_until_idle, live)
        if live.files is not None:
            live.files.sync(live.session.patch)  # the editor has these already: only later changes are written
        self.sessions[session_id] = live
        return schema.LoadSessionResponse(modes=_modes(live))

    def _open(self, session_id: str, cwd: str) -> Live:
        from ..config import ConfigError
        from ..models import ModelConfigError
        from ..run.session import Session
        from ..run.solve_request import prepare_solve

        try:
            prepared = prepare_solve(replace(self.request, repo=cwd), cwd)
        except (ConfigError, ModelConfigError) as exc:
            raise acp.RequestError.invalid_params({"message": str(exc)}) from None
        live: Live | None = None

        def emit(event: Event) -> None:
            if live is not None:
                self._emit(live, event)

        def ask(request) -> None:
            assert self.loop is not None  # connected
            asyncio.run_coroutine_threadsafe(self._ask(session_id, request), self.loop)

        # the editor's files are never written on disk by codeagent: through the editor, or the patch is handed over
        session = Session(prepared.config, prepared.model, repo=cwd, mode=self.request.approval_mode,
                          replay=prepared.replay, ask=ask, emit=emit, write_through=False)
        problem = session.repo_problem()
        if problem:
            session.close()
            raise acp.RequestError.invalid_params({"message": problem})
        live = Live(session, session.repo, writes=self.client_writes)
        return live

    async def set_session_mode(self, mode_id: str, session_id: str, **kwargs):
        live = self._live(session_id)
        if mode_id not in MODES:
            raise acp.RequestError.invalid_params({"modeId": mode_id})
        live.session.set_mode(mode_id)
        return schema.SetSessionModeResponse()

    async def prompt(self, prompt: list, session_id: str, **kwargs):
        live = self._live(session_id)
        if live.turn is not None or live.session.busy:
            raise acp.RequestError.invalid_request({"message": "a prompt turn is already running in this session"})
        text = prompt_text(prompt)
        if not text.strip():
            return schema.PromptResponse(stop_reason="end_turn")
        live.turn, live.cancelled = asyncio.Queue(), False
        try:
            outcome = live.session.submit(text)
            if outcome not in (Submitted.STARTED, Submitted.CONTINUED):
                raise acp.RequestError.internal_error({"message": f"the session did not take the prompt ({outcome})"})
            while (update := await live.turn.get()) is not END:
                if isinstance(update, FileWrite):
                    await self._write(session_id, live, update)
                else:
                    await self.conn.session_update(session_id=session_id, update=update)
            if live.session.patch and live.session.patch_file:
                told = (f"\n\nThe changes are in your files, written through the editor (review or undo them "
                        f"there); the whole patch is also in {live.session.patch_file}." if live.files is not None
                        else f"\n\nThe change so far is in {live.session.patch_file} (your files are untouched): "
                             f"`git apply {live.session.patch_file}` applies it.")
                await self.conn.session_update(session_id=session_id, update=acp.update_agent_message_text(told))
        finally:
            live.turn = None
            if live.session.trajectory_id:
                await asyncio.to_thread(remember, live.session.store.root, session_id, live.session.trajectory_id)
        return schema.PromptResponse(stop_reason=stop_reason(live.session.last_status, live.cancelled))

    async def cancel(self, session_id: str, **kwargs) -> None:
        live = self.sessions.get(session_id)
        if live is not None and live.turn is not None:
            live.cancelled = True
            live.session.interrupt()

    async def close_session(self, session_id: str, **kwargs):
        live = self.sessions.pop(session_id, None)
        if live is not None:
            await asyncio.to_thread(live.session.close)
        return schema.CloseSessionResponse()

    async def close_all(self) -> None:
        for session_id in list(self.sessions):
            await self.close_session(session_id)

    # -- from the session's thread --------------------------------------------------------------

    async def _write(self, session_id: str, live: Live, write: FileWrite) -> None:
        """One file written through the editor; a failure is said, and the file tried again later."""
        try:
            await self.conn.write_text_file(session_id=session_id, path=write.path, content=write.content)
        except Exception as exc:  # noqa: BLE001 - the editor refused or failed: the patch file still has it
            if live.files is not None:
                live.files.failed(write)
            await self.conn.session_update(session_id=session_id, update=acp.update_agent_message_text(
                f"\n[warning] the editor did not write {write.relative}: {exc}\n"))

    def _emit(self, live: Live, event: Event) -> None:
        turn = live.turn
        if turn is None:
            return  # between turns (a background notice): nobody is listening
        updates = [*live.translate(event), *live.file_updates()]
        if isinstance(event, SessionChanged) and not live.session.busy:
            updates = [*updates, END]
        assert self.loop is not None  # connected
        for update in updates:
            self.loop.call_soon_threadsafe(turn.put_nowait, update)

    async def _ask(self, session_id: str, request) -> None:
        """The editor's answer to one approval (a rejection when it cannot answer)."""
        options = [schema.PermissionOption(option_id="once", name="Allow once", kind="allow_once")]
        if request.always_label:
            options.append(schema.PermissionOption(option_id="always", name=f"Always allow {request.always_label}",
                                                   kind="allow_always"))
        options.append(schema.PermissionOption(option_id="reject", name="Reject", kind="reject_once"))
        live = self.sessions.get(session_id)
        call_id = live.translate.last_call if live is not None else ""  # asked right after its ToolCalled
        shown = live.translate.shown(request.arguments) if live is not None and request.kind == "edit" else None
        diff = [acp.tool_diff_content(str(shown), request.change[1], request.change[0])] \
            if shown is not None and request.change is not None else None  # the edit, shown before it runs
        tool_call = schema.ToolCallUpdate(tool_call_id=call_id or "approval", title=request.title,
                                          raw_input=request.arguments, content=diff,
                                          locations=[schema.ToolCallLocation(path=str(shown))] if shown else None)
        try:
            response = await self.conn.request_permission(session_id=session_id, tool_call=tool_call,
                                                          options=options)
            outcome = response.outcome
            choice = outcome.option_id if outcome.outcome == "selected" else "cancelled"
        except Exception as exc:  # noqa: BLE001 - the editor failed or went away: the call does not run
            request.answer(Decision("deny", f"the editor did not answer: {exc}"))
            return
        if choice in ("once", "always"):
            if live is not None and live.turn is not None and call_id:
                live.turn.put_nowait(acp.update_tool_call(call_id, status="in_progress"))
            request.answer(Decision(choice))
        else:
            request.answer(Decision("deny", "the user rejected it" if choice == "reject" else "the user cancelled"))

    def _live(self, session_id: str) -> Live:
        live = self.sessions.get(session_id)
        if live is None:
            raise acp.RequestError.invalid_params({"sessionId": f"no such session: {session_id}"})
        return live


def _check_folder(cwd: str) -> None:
    if not os.path.isabs(cwd) or not os.path.isdir(cwd):
        raise acp.RequestError.invalid_params({"cwd": f"not an absolute path to a folder: {cwd}"})


def _modes(live: Live) -> schema.SessionModeState:
    return schema.SessionModeState(current_mode_id=live.session.mode, available_modes=[
        schema.SessionMode(id=mode, name=mode, description=text) for mode, text in MODES.items()])


def _until_idle(live: Live) -> None:
    while live.session.busy:
        time.sleep(0.05)


def prompt_text(blocks: list) -> str:
    """The user's message: its text, with embedded resources (files the editor attached) after it."""
    parts = []
    for block in blocks:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource_link":
            parts.append(f"(attached: {block.uri})")
        elif kind == "resource" and getattr(block.resource, "text", None) is not None:
            parts.append(f"Attached {block.resource.uri}:\n```\n{block.resource.text.rstrip()}\n```")
    return "\n\n".join(parts)


def stop_reason(status: str | None, cancelled: bool) -> str:
    if cancelled or status == ExitStatus.INTERRUPTED:
        return "cancelled"
    if status in LIMITS:
        return "max_turn_requests"
    return "end_turn"


async def serve(request: SolveRequest) -> None:
    """Speak ACP on stdin/stdout until the editor closes stdin. Anything else printed to stdout goes to
    stderr (stdout carries only the protocol); the sessions' sandboxes are removed on the way out."""
    from acp.stdio import stdio_streams

    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    real_stdout, sys.stdout = sys.stdout, protocol  # stdio_streams writes to sys.stdout
    try:
        output_stream, input_stream = await stdio_streams(limit=50 * 1024 * 1024)
    finally:
        sys.stdout = real_stdout
    agent = CodeagentAgent(request)
    try:
        await acp.run_agent(agent, input_stream, output_stream, use_unstable_protocol=True)  # for session/close
    finally:
        await agent.close_all()
