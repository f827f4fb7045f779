"""When to ask the user before a tool call runs, and what to show them.

Three modes, as in other terminal agents: `suggest` asks before every command and every edit,
`auto-edit` lets edits run and asks before commands, `full-auto` never asks (the sandbox is the
guard). Reads (viewing files, search, code navigation, submit) never ask, nor do read-only shell
commands (`ls`, `cat`, `git diff` ...: tools/read_only_commands.py).

"Always allow" remembers the command prefixes of a shell command (`git status`, `python -m pytest`,
`ls` ...), the path of an edit, or a tool; with `SavedRules` (approval_rules.py) they are kept for
the repository in the user's folder and apply in later sessions. A shell command is allowed by the
rules only when every simple command in it matches a remembered prefix and it has nothing the
prefixes cannot see: command substitution, subshells, background jobs, or redirections other than
to /dev/null and between stdout and stderr. Programs that run another command given as their
arguments (`bash -c`, `xargs`, `env`, `sudo` ...) are never remembered: allow them once.
"""

from __future__ import annotations

import difflib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from ...agent.loop import Approval
from ...models import ToolCall
from ...tools.read_only_commands import is_read_only_command
from ...tools.registry import read_only_tools
from ...tools.shell_words import ASSIGNMENT, command_prefixes
from .approval_rules import Rule, SavedRules

MODES = ("suggest", "auto-edit", "full-auto")
EDIT_COMMANDS = {"create", "str_replace", "insert", "undo_edit"}
# They run the command in their arguments: a prefix rule for them would allow anything.
RUNNERS = {"bash", "sh", "zsh", "dash", "ksh", "fish", "eval", "exec", "env", "xargs", "sudo", "su", "doas", "nohup",
           "timeout", "time", "nice", "ionice", "setsid", "stdbuf", "command", "builtin", "source", ".", "parallel",
           "watch", "chroot", "flock", "script"}
REACHES_OUT = {"web_fetch"}  # read-only, but the host reaches the network: asked like a command (or an MCP tool)


def classify(tool: str, arguments: dict[str, Any]) -> str:
    """'read', 'edit' or 'command'. Tools we do not know are treated as commands."""
    if tool in read_only_tools() and tool not in REACHES_OUT:  # `read_only: true` in tools/*.yaml
        return "read"
    if tool == "editor":
        return "edit" if arguments.get("command") in EDIT_COMMANDS else "read"
    return "command"


def _edit_path(arguments: dict[str, Any], workdir: str = "/testbed") -> str:
    path = str(arguments.get("path", ""))
    if path.startswith(workdir.rstrip("/") + "/"):
        path = path[len(workdir.rstrip("/")) + 1:]
    return path.removeprefix("./")


@dataclass
class Decision:
    """The user's answer: allow `once`, allow `always` (remember the rule), or `deny` with a reason."""

    kind: str  # once | always | deny
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.kind in ("once", "always")


@dataclass(eq=False)
class ApprovalRequest:
    """One question to the user, answered from any thread; the agent's thread waits for it."""

    tool: str
    arguments: dict[str, Any]
    kind: str  # edit | command
    title: str
    body: str  # the command, or the edit as a unified diff
    body_language: str  # "bash" | "diff" | "json"
    always_label: str | None  # what "always allow" would remember; None: not offered
    saved: bool = False  # "always" is kept for the repository, not only this session
    change: tuple[str | None, str] | None = None  # an edit's file before (None: a new file) and after it
    _done: threading.Event = field(default_factory=threading.Event, repr=False)
    decision: Decision | None = None

    def answer(self, decision: Decision) -> bool:
        """The first answer wins; returns False when it was already answered."""
        if self._done.is_set():
            return False
        self.decision = decision
        self._done.set()
        return True

    @property
    def answered(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> Decision | None:
        self._done.wait(timeout)
        return self.decision


class ApprovalPolicy:
    """The mode and the "always allow" rules (this session's, and with `saved` the repository's)."""

    def __init__(self, mode: str = "suggest", saved: SavedRules | None = None):
        self.mode = check_mode(mode)
        self.prefixes: set[tuple[str, ...]] = set()
        self.paths: set[str] = set()
        self.tools: set[str] = set()
        self.saved = saved
        for rule in saved.load() if saved else []:
            self._set(rule.kind).add(rule.value)

    def needs_approval(self, tool: str, arguments: dict[str, Any]) -> bool:
        kind = classify(tool, arguments)
        if kind == "read" or self.mode == "full-auto":
            return False
        if kind == "edit":
            return self.mode == "suggest" and _edit_path(arguments) not in self.paths
        if tool != "bash":
            return tool not in self.tools
        command = str(arguments.get("command", ""))
        if is_read_only_command(command):  # ls, cat, git diff ... run in the sandbox without asking
            return False
        prefixes = command_prefixes(command)
        return prefixes is None or not all(self._allowed(prefix) for prefix in prefixes)

    def _allowed(self, prefix: tuple[str, ...]) -> bool:
        return any(prefix[:len(rule)] == rule for rule in self.prefixes)

    def always_label(self, tool: str, arguments: dict[str, Any]) -> str | None:
        rules = self.rules_for(tool, arguments)
        return ", ".join(rule.describe() for rule in rules) if rules else None

    def rules_for(self, tool: str, arguments: dict[str, Any]) -> list[Rule]:
        """What "always allow" would remember for this call ([]: it is not offered)."""
        kind = classify(tool, arguments)
        if kind == "edit":
            return [Rule("edit", _edit_path(arguments))]
        if tool != "bash":
            return [Rule("tool", tool)]
        prefixes = command_prefixes(str(arguments.get("command", "")))
        if prefixes is None or any(_program(prefix) in RUNNERS for prefix in prefixes):
            return []
        return [Rule("command", prefix) for prefix in dict.fromkeys(prefixes)]

    def remember(self, tool: str, arguments: dict[str, Any]) -> None:
        rules = self.rules_for(tool, arguments)
        for rule in rules:
            self._set(rule.kind).add(rule.value)
        if self.saved is not None and rules:
            try:
                self.saved.add(rules)
            except (OSError, ValueError) as exc:  # still allowed for this session
                self.saved.problem = f"could not save the allow-rule in {self.saved.path}: {exc}"

    def rules(self) -> list[Rule]:
        return sorted((Rule(kind, value) for kind in KIND_ORDER for value in self._set(kind)),
                      key=lambda rule: (KIND_ORDER.index(rule.kind), str(rule.value)))

    def forget(self, rule: Rule) -> None:
        self._set(rule.kind).discard(rule.value)
        if self.saved is not None:
            self.saved.remove(rule)

    def _set(self, kind: str) -> set:
        sets: dict[str, set] = {"command": self.prefixes, "edit": self.paths, "tool": self.tools}
        return sets[kind]


KIND_ORDER = ("command", "edit", "tool")


def _program(prefix: tuple[str, ...]) -> str:
    words = [word for word in prefix if not ASSIGNMENT.match(word)]
    return words[0].rsplit("/", 1)[-1] if words else ""


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"unknown approval mode {mode!r}; choose one of {', '.join(MODES)}")
    return mode


def next_mode(mode: str) -> str:
    return MODES[(MODES.index(mode) + 1) % len(MODES)]


def build_request(policy: ApprovalPolicy, tool: str, arguments: dict[str, Any], read_file=None) -> ApprovalRequest:
    """What the dialog shows. `read_file(path) -> bytes` reads the sandbox, to preview an edit."""
    kind = classify(tool, arguments)
    label, saved = policy.always_label(tool, arguments), policy.saved is not None
    if tool == "bash":
        return ApprovalRequest(tool, arguments, "command", "Run this command?", str(arguments.get("command", "")),
                               "bash", label, saved)
    if kind == "edit":
        path = _edit_path(arguments)
        change = edited_text(arguments, read_file)
        body, language = preview_edit(arguments, read_file, change)
        verb = "Create" if arguments.get("command") == "create" else "Edit"
        return ApprovalRequest(tool, arguments, "edit", f"{verb} {path}?", body, language, label, saved, change)
    return ApprovalRequest(tool, arguments, kind, f"Call the {tool} tool?",
                           json.dumps(arguments, indent=2, ensure_ascii=False), "json", label, saved)


def preview_edit(arguments: dict[str, Any], read_file=None,
                 change: tuple[str | None, str] | None = None) -> tuple[str, str]:
    """The edit as a unified diff when it can be worked out (`edited_text`), else its arguments as JSON."""
    path = _edit_path(arguments)
    if arguments.get("command") == "undo_edit":
        return f"Undo the agent's last edit to {path}.", "text"
    change = change or edited_text(arguments, read_file)
    if change is None:
        return json.dumps(arguments, indent=2, ensure_ascii=False), "json"
    old, new = change
    return _unified(old or "", new, path, new_file=old is None), "diff"


def edited_text(arguments: dict[str, Any], read_file=None) -> tuple[str | None, str] | None:
    """An editor call's file before (None: it creates the file) and after it runs, where that can be worked
    out before it runs (`read_file(path) -> bytes` reads the sandbox); None where it cannot (the editor will
    refuse the call, or say why)."""
    command = arguments.get("command")
    if command == "create":
        return None, str(arguments.get("file_text", ""))
    if read_file is None or command not in ("str_replace", "insert"):
        return None
    try:
        old = read_file(_edit_path(arguments)).decode("utf-8")
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if command == "str_replace":
        old_str, new_str = arguments.get("old_str") or "", arguments.get("new_str") or ""
        if not old_str or old.count(old_str) != 1:
            return None
        return old, old.replace(old_str, new_str, 1)
    lines = old.split("\n")
    final_newline = old.endswith("\n")
    if final_newline:
        lines.pop()
    line = arguments.get("insert_line")
    if not isinstance(line, int) or not 0 <= line <= len(lines):
        return None
    lines[line:line] = str(arguments.get("new_str", "")).removesuffix("\n").split("\n")
    return old, "\n".join(lines) + ("\n" if final_newline else "")


def _unified(old: str, new: str, path: str, new_file: bool = False) -> str:
    diff = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                fromfile="/dev/null" if new_file else f"a/{path}", tofile=f"b/{path}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in diff)


class Approver:
    """The agent's approver in a session: asks the user (through `ask`) when the policy says so and
    waits for the answer; an interrupt or the session closing answers what is still open."""

    def __init__(self, policy: ApprovalPolicy, ask: Callable[[ApprovalRequest], None] | None = None):
        self.policy = policy
        self.ask = ask
        self.closed = False
        self._pending: set[ApprovalRequest] = set()
        self._lock = threading.Lock()

    def __call__(self, call: ToolCall, read_file: Callable[[str], bytes] | None = None, *,
                 force: bool = False) -> Approval:
        """`force`: ask even where the mode or a rule would allow it (a hook said "ask")."""
        if not force and not self.policy.needs_approval(call.name, call.arguments):
            return Approval(True, source="config")
        request = build_request(self.policy, call.name, call.arguments, read_file=read_file)
        with self._lock:
            if self.closed:
                return Approval(False, "the session was closed")
            self._pending.add(request)
        try:
            if self.ask is None:
                request.answer(Decision("deny", "no one is there to approve it"))
            else:
                self.ask(request)
            decision = cast(Decision, request.wait())  # no timeout: it returns the answer
        finally:
            with self._lock:
                self._pending.discard(request)
        if decision.kind == "always":
            self.policy.remember(call.name, call.arguments)
        return Approval(True) if decision.allowed else Approval(False, decision.reason)

    @property
    def waiting(self) -> bool:
        """A request waits for the user's answer."""
        with self._lock:
            return any(not request.answered for request in self._pending)

    def deny_pending(self, reason: str) -> None:
        with self._lock:
            pending = list(self._pending)
        for request in pending:
            request.answer(Decision("deny", reason))
