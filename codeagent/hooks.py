"""Hooks: the user's own commands run at points of a run, with the contract of Claude Code's hooks.

Events: PreToolUse, PostToolUse, UserPromptSubmit, Stop, SessionStart, from the user's config or a
trusted repository's (config/trust.py never takes `hooks` from an untrusted one). A hook gets the event
as JSON on stdin — the only way the model's data (tool input, tool output) reaches it; the command
line is the user's, never built from that data. Exit 0: done (stdout may be JSON that decides);
exit 2: blocking, stderr is the reason; any other exit, a crash or a timeout: reported to the user,
nothing is blocked.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .config import HookSettings

REASON_CHARS = 10_000  # of a hook's stdout/stderr given to the model


@dataclass
class Verdict:
    """What the hooks of one event decided."""

    block: bool = False  # exit 2 or decision block/deny
    decision: str | None = None  # PreToolUse: allow | deny | ask
    reason: str = ""
    context: list[str] = field(default_factory=list)  # text for the model (additionalContext, stdout)


class Hooks:
    def __init__(self, settings: HookSettings, *, session_id: str = "", transcript_path: str = "",
                 cwd: str | None = None, warn: Callable[[str], None] | None = None):
        self.settings = settings
        self.common = {"session_id": session_id, "transcript_path": transcript_path, "cwd": cwd or os.getcwd()}
        self.warn = warn or (lambda message: print(message, file=sys.stderr))
        self.stop_hook_active = False  # the run goes on because a Stop hook said so

    def pre_tool_use(self, tool: str, tool_input: dict, tool_use_id: str) -> Verdict:
        return self._fire("PreToolUse", tool, {"tool_name": tool, "tool_input": tool_input,
                                                "tool_use_id": tool_use_id})

    def post_tool_use(self, tool: str, tool_input: dict, tool_use_id: str, response: dict) -> Verdict:
        return self._fire("PostToolUse", tool, {"tool_name": tool, "tool_input": tool_input,
                                                 "tool_use_id": tool_use_id, "tool_response": response})

    def user_prompt_submit(self, prompt: str) -> Verdict:
        return self._fire("UserPromptSubmit", None, {"prompt": prompt})

    def stop(self) -> Verdict:
        verdict = self._fire("Stop", None, {"stop_hook_active": self.stop_hook_active})
        self.stop_hook_active = verdict.block
        return verdict

    def session_start(self, source: str) -> Verdict:
        return self._fire("SessionStart", source, {"source": source})

    # -- running them --------------------------------------------------------------------------

    def _fire(self, event: str, target: str | None, fields: dict[str, Any]) -> Verdict:
        verdict = Verdict()
        commands = [hook for group in getattr(self.settings, event) if _matches(group.matcher, target)
                    for hook in group.hooks]
        if not commands:
            return verdict
        payload = json.dumps({**self.common, "hook_event_name": event, **fields}, ensure_ascii=False, default=str)
        for hook in commands:
            timeout = hook.timeout or self.settings.timeout
            code, out, err = _run(hook.command, payload, timeout, self.common["cwd"])
            label = f"{event} hook `{_short(hook.command)}`"
            if code is None:
                self.warn(f"warning: {label} {err}; it was skipped")
            elif code == 2:
                verdict.block = True
                verdict.decision = "deny"
                verdict.reason = _join(verdict.reason, err.strip() or f"{event} hook exited 2")
                if event in ("UserPromptSubmit", "SessionStart"):
                    self.warn(f"{label}: {_short(err.strip(), 300)}")
            elif code != 0:
                self.warn(f"warning: {label} failed (exit {code}): {_short(err.strip() or out.strip(), 300)}")
            else:
                self._read_output(event, label, out, verdict)
        return verdict

    def _read_output(self, event: str, label: str, out: str, verdict: Verdict) -> None:
        data = _json_object(out)
        if data is None:  # plain text: context for the events that take it
            if out.strip() and event in ("UserPromptSubmit", "SessionStart"):
                verdict.context.append(out.strip()[:REASON_CHARS])
            return
        if isinstance(data.get("systemMessage"), str):
            self.warn(f"{label}: {_short(data['systemMessage'], 300)}")
        specific: dict[str, Any] = data["hookSpecificOutput"] if isinstance(data.get("hookSpecificOutput"), dict) else {}
        reason = str(data.get("reason") or "")
        decision: Any = data.get("decision")
        if event == "PreToolUse":
            permission = specific.get("permissionDecision") or {"approve": "allow", "block": "deny"}.get(decision)
            reason = str(specific.get("permissionDecisionReason") or reason)
            if permission in ("allow", "deny", "ask") and _stronger(permission, verdict.decision):
                verdict.decision = permission
                verdict.block = permission == "deny"
                if permission != "allow" or not verdict.reason:
                    verdict.reason = reason
        elif decision == "block":
            verdict.block = True
            verdict.reason = _join(verdict.reason, reason or f"a {event} hook blocked it")
        context = specific.get("additionalContext")
        if isinstance(context, str) and context.strip():
            verdict.context.append(context.strip()[:REASON_CHARS])


_STRENGTH = {None: 0, "allow": 1, "ask": 2, "deny": 3}  # deny wins over ask, ask over allow


def _stronger(decision: str, current: str | None) -> bool:
    return _STRENGTH[decision] > _STRENGTH[current]


def _matches(matcher: str, target: str | None) -> bool:
    if target is None or matcher in ("", "*"):
        return True
    try:
        return re.fullmatch(matcher, target) is not None
    except re.error:
        return matcher == target


def _run(command: str, payload: str, timeout: float, cwd: str) -> tuple[int | None, str, str]:
    """(exit code, stdout, stderr); a code of None: the hook did not run or finish (stderr says why)."""
    try:
        process = subprocess.Popen(command, shell=True, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        return None, "", f"could not start ({exc.strerror or exc})"
    try:
        out, err = process.communicate(payload.encode("utf-8"), timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        try:
            process.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # a descendant that left the group still holds a pipe
            pass
        return None, "", f"ran past its timeout of {timeout:g}s"
    finally:
        if process.poll() is None:
            _kill_group(process)
            process.wait()
    return process.returncode, _text(out), _text(err)


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")[-REASON_CHARS * 4:]


def _json_object(text: str) -> dict | None:
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _join(first: str, second: str) -> str:
    return (f"{first}\n{second}" if first else second)[:REASON_CHARS]


def _short(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"
