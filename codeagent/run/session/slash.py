"""Slash commands, the language of the session's clients: their names, help, and parsing."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

COMMANDS: dict[str, tuple[str, str]] = {
    # name: (arguments, what it does) -- kept short: the help must read well at 80 columns
    "model": ("[NAME] [--api-base URL]", "show, or check and switch model (next step)"),
    "mode": ("[MODE]", "approval mode: suggest, auto-edit or full-auto"),
    "plan": ("[on|off]", "plan mode: read-only tools, answers in text"),
    "init": ("", "have the agent write a first AGENTS.md"),
    "diff": ("", "show or hide the patch against the base commit"),
    "undo": ("", "revert the agent's last change to the files"),
    "apply": ("[PATH]", "apply the patch to your working tree (or PATH)"),
    "cost": ("", "tokens, cost and steps so far"),
    "compact": ("", "summarize the conversation to free context"),
    "candidates": ("[pick N|more]", "a candidate's patch, choose one, or go on (more)"),
    "resume": ("[ID|last]", "list saved sessions, or continue one"),
    "rules": ("[remove N]", "list the saved allow-rules, or drop one"),
    "clear": ("", "forget this task (it stays saved); start anew"),
    "help": ("", "this help"),
    "quit": ("", "stop the agent, remove the sandbox, exit"),
}

KEYS = [
    ("Enter", "send; while the agent runs, it reads it next step"),
    ("Ctrl-J, \\ Enter", "new line"),
    ("Up", "the previous message again (in an empty box)"),
    ("Ctrl-C", "interrupt the running step; twice: quit"),
    ("Shift+Tab", "cycle the approval mode"),
    ("Ctrl-T", "plan mode on or off (read-only tools)"),
    ("@path, Right", "put a repository file in the message; Right/Tab completes"),
    ("Tab, click", "a tool call; Enter expands it, typing goes to the input"),
    ("Esc", "back to the input (and from the patch to the conversation)"),
]


@dataclass
class SlashCommand:
    name: str
    argument: str


def parse(text: str) -> SlashCommand | None:
    """`/name argument` -> SlashCommand; None when the text is not a command (a message). A
    leading `//` sends a message that starts with `/`."""
    text = text.strip()
    if not text.startswith("/") or text.startswith("//"):
        return None
    name, _, argument = text[1:].partition(" ")
    return SlashCommand(name.lower(), argument.strip())


def resolve(name: str) -> str | None:
    """A command's full name from a unique prefix (`/q` is /quit)."""
    if name in COMMANDS:
        return name
    matches = [command for command in COMMANDS if command.startswith(name)]
    return matches[0] if len(matches) == 1 else None


HELP_COLUMN = 20  # the usage column of /help


def help_text(extra: Sequence[tuple[str, str, str]] = (), custom: Sequence[tuple[str, str, str]] = ()) -> str:
    """The commands, then `extra` ones (name, arguments, what: MCP servers' prompts), the custom commands
    (run/commands.py: name, argument hint, description), then the keys. A usage longer than the
    column takes its own line: the help reads at 80 columns."""
    listed = [*((name, args, what) for name, (args, what) in COMMANDS.items()), *extra]
    width = min(HELP_COLUMN, max(len(f"/{name} {args}".strip()) for name, args, _ in [*listed, *custom]))

    def entry(name: str, args: str, what: str) -> list[str]:
        usage = f"/{name} {args}".strip()
        return [f"  {usage}", f"  {'':<{width}}  {what}"] if len(usage) > width else [f"  {usage:<{width}}  {what}"]

    lines = ["Commands:"]
    for name, args, what in listed:
        lines += entry(name, args, what)
    if custom:
        lines.append("Custom commands:")
        for name, args, what in custom:
            lines += entry(name, args, what)
    lines.append("Keys:")
    key_width = max(len(key) for key, _ in KEYS)
    lines.extend(f"  {key:<{key_width}}  {what}" for key, what in KEYS)
    return "\n".join(lines)


def model_switch(argument: str) -> tuple[str, str | None]:
    """`/model NAME [--api-base URL]` -> (name, api_base or None). ValueError says what is wrong (a
    name with a space, a flag it does not know, a server that is not an http(s) URL)."""
    words = argument.split()
    api_base, rest = None, words[1:]
    if rest and rest[0].startswith("--api-base="):
        api_base, rest = rest[0].partition("=")[2], rest[1:]
    elif rest and rest[0] == "--api-base":
        api_base, rest = (rest[1], rest[2:]) if len(rest) > 1 else ("", [])
    if not words or words[0].startswith("-") or rest:
        raise ValueError(f"/model {argument}: say /model NAME [--api-base URL] (a model name has no spaces)")
    if api_base is not None and not re.fullmatch(r"https?://[^\s/]+(/\S*)?", api_base):
        raise ValueError(f"/model {argument}: --api-base needs the server's URL, e.g. http://localhost:8000/v1")
    return words[0], api_base


def plan_mode(current: str, argument: str) -> Literal["normal", "plan"]:
    """The work mode `/plan [on|off]` asks for: no argument toggles. ValueError for another word."""
    word = argument.strip().lower()
    if not word:
        return "normal" if current == "plan" else "plan"
    if word in ("on", "plan"):
        return "plan"
    if word in ("off", "normal"):
        return "normal"
    raise ValueError(f"/plan {argument}: say /plan, /plan on or /plan off")


def plan_notice(mode: str) -> str:
    if mode == "plan":
        return ("Plan mode: the agent gets read-only tools and answers in plain text; it changes nothing. "
                "/plan or Ctrl-T again lets it act (the conversation goes on).")
    return "Plan mode off: the agent may edit files and run commands again (approvals as set by /mode)."
