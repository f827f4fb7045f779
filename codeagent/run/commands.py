"""Custom slash commands in Claude Code's format: Markdown files whose body is the prompt.

`~/.config/codeagent/commands/*.md` (the user's) and, in a trusted repository only,
`.codeagent/commands/*.md` and `.claude/commands/*.md`. Optional front matter: description,
allowed-tools, argument-hint, model. The body's `$ARGUMENTS` is what follows `/name`, and `$1`,
`$2`... its words. A file in a subfolder gets a namespaced name: frontend/build.md is
/frontend:build. A name a built-in command has is refused with a warning.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..config import Config, repository_trusted, user_config_folder
from ..tools.skill import front_matter, tool_list

MAX_BYTES = 256_000
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(:[A-Za-z0-9][A-Za-z0-9._-]*)*")
# Claude Code's tool names, as codeagent's tools (an allowed-tools entry names one of either)
CLAUDE_TOOLS = {"bash": "bash", "read": "editor", "write": "editor", "edit": "editor", "multiedit": "editor",
                "grep": "search", "glob": "search", "ls": "search"}


@dataclass(frozen=True)
class CustomCommand:
    name: str  # without the slash; namespaced as folder:name
    description: str
    argument_hint: str
    source: Path
    body: str
    allowed_tools: tuple[str, ...] = ()
    model: str | None = None

    def render(self, arguments: str) -> str:
        """The body with $ARGUMENTS and $1..$9 filled in; arguments the body does not use are added
        at its end, so nothing the user typed is lost."""
        try:
            words = shlex.split(arguments)
        except ValueError:
            words = arguments.split()
        used = False

        def fill(match: re.Match) -> str:
            nonlocal used
            used = True
            if match[1]:
                return arguments
            index = int(match[2]) - 1
            return words[index] if index < len(words) else ""

        text = re.sub(r"\$(?:(ARGUMENTS)\b|(\d))", fill, self.body).strip()
        if arguments.strip() and not used:
            text += f"\n\nARGUMENTS: {arguments.strip()}"
        return text

    def tool_names(self, available: Iterable[str]) -> list[str]:
        """codeagent's tools that allowed-tools names (`Bash(git add:*)` is bash); submit stays."""
        available = list(available)
        wanted = set()
        for entry in self.allowed_tools:
            base = entry.split("(", 1)[0].strip()
            name = base if base in available else CLAUDE_TOOLS.get(base.lower())
            if name in available:
                wanted.add(name)
        return [name for name in available if name in wanted or name == "submit"]


def command_folders(repo: str | Path | None, trusted: bool) -> tuple[list[Path], list[Path]]:
    """(folders read, in order: an earlier one wins a name; a repository's folders left out untrusted)."""
    read, left = [user_config_folder() / "commands"], list[Path]()
    if repo is not None and Path(repo).is_dir():
        for folder in (Path(repo) / ".codeagent" / "commands", Path(repo) / ".claude" / "commands"):
            (read if trusted else left).append(folder)
    return read, [folder for folder in left if folder.is_dir()]


def custom_commands(config: Config, repo: str | Path | None, *, reserved: Iterable[str] = (),
                    warn: Callable[[str], None] | None = None) -> list[CustomCommand]:
    """The custom commands for `repo` (None: the user's only), sorted by name. `reserved`: the
    built-in commands' names (a file by such a name is refused). Problems go to `warn`."""
    warn = warn or (lambda text: None)
    reserved = set(reserved)
    read, untrusted = command_folders(repo, repository_trusted(config, repo))
    for folder in untrusted:
        warn(f"warning: not loading the commands in {folder}: the repository is not trusted (pass --trust, or add "
             "it to trusted_projects)")
    found: dict[str, CustomCommand] = {}
    for folder in read:
        confine = folder.resolve() if folder.is_dir() else None
        if confine is None:
            continue
        for path in sorted(folder.rglob("*.md")):
            relative = path.relative_to(folder).with_suffix("")
            name = ":".join(relative.parts)
            try:
                if not path.resolve().is_relative_to(confine) or not path.is_file():
                    continue  # a symlink out of the commands folder is not one of its commands
                text = path.read_bytes()[:MAX_BYTES].decode("utf-8", errors="replace")
            except OSError:
                continue
            if not _NAME.fullmatch(name):
                warn(f"warning: the command file {path} is left out: {name!r} is not a command name")
                continue
            if name in reserved:
                warn(f"warning: the command file {path} is left out: /{name} is a built-in command")
                continue
            if name in found:
                continue  # the user's (or .codeagent's) by that name wins
            meta, body = front_matter(text)
            description = " ".join(str(meta.get("description") or "").split()) or _first_line(body)
            found[name] = CustomCommand(name, description[:200], str(meta.get("argument-hint") or "").strip(), path,
                                        body, tool_list(meta.get("allowed-tools")),
                                        str(meta["model"]) if meta.get("model") else None)
    return sorted(found.values(), key=lambda command: command.name)


def find_command(commands: list[CustomCommand], text: str) -> tuple[CustomCommand, str] | None:
    """`/name arguments` -> (the command, its arguments) when `name` is one of `commands`."""
    text = text.strip()
    if not text.startswith("/") or text.startswith("//"):
        return None
    name, _, arguments = text[1:].partition(" ")
    for command in commands:
        if command.name == name:
            return command, arguments.strip()
    return None


def _first_line(body: str) -> str:
    for line in body.splitlines():
        if line.strip():
            return line.strip().lstrip("#").strip()
    return ""
