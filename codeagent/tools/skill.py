"""Skills in the SKILL.md format Claude Code and Codex share, and the `skill` tool that opens one.

A skill is a folder with a SKILL.md (YAML front matter: name, description, optional allowed-tools;
then the body) and any files beside it. Progressive disclosure: only the name and description go
in the system prompt (prompts/skills.j2); the body and the files are read when the model calls
`skill`. The folders are on the HOST (the user's config folder, a trusted repository's
.codeagent/skills and .claude/skills), so the model's file argument is resolved inside the skill's
folder and nothing else: no absolute path, no `..`, no symlink that leads out.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .base import ToolContext, ToolError

MAX_SKILLS = 50
DESCRIPTION_CHARS = 1_024
BODY_CHARS = 60_000
FILE_BYTES = 256_000  # a file the model asks for is read up to this much
MAX_LISTED = 200
SANDBOX_SKILLS = "/opt/codeagent/skills"  # where a Docker sandbox has the skills' folders, read-only (run/skill_mounts.py)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


def front_matter(text: str) -> tuple[dict, str]:
    """(front matter, body) of a Markdown file; no or broken front matter: ({}, the whole text)."""
    match = _FRONT.match(text)
    if not match:
        return {}, text
    try:
        data = yaml.safe_load(match[1])
    except yaml.YAMLError:
        return {}, text[match.end():]
    return (data if isinstance(data, dict) else {}), text[match.end():]


def tool_list(value) -> tuple[str, ...]:
    """allowed-tools as Claude Code writes it: a list, or one string split at commas or spaces
    outside parentheses (`Bash(git add:*), Read`)."""
    if isinstance(value, list):
        return tuple(str(item).strip() for item in value if str(item).strip())
    if isinstance(value, str):
        return tuple(part.strip() for part in re.findall(r"[^,\s(]+(?:\([^)]*\))?", value) if part.strip())
    return ()


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    folder: Path  # resolved; every file read is inside it
    allowed_tools: tuple[str, ...] = ()
    source: str = ""  # the skills folder it came from, for messages


@dataclass
class SkillRoots:
    """Where skills are looked for, in order (an earlier one wins a name); `untrusted` names a
    repository's folders left out because the repository is not trusted."""
    roots: list[tuple[Path, Path | None]] = field(default_factory=list)  # (folder, confining root or None)
    untrusted: list[Path] = field(default_factory=list)


def skill_roots(user_folder: Path, repo: str | Path | None, trusted: bool) -> SkillRoots:
    found = SkillRoots(roots=[(user_folder, None)])
    if repo is not None and Path(repo).is_dir():
        for folder in (Path(repo) / ".codeagent" / "skills", Path(repo) / ".claude" / "skills"):
            if trusted:
                found.roots.append((folder, Path(repo)))
            elif folder.is_dir():
                found.untrusted.append(folder)
    return found


def find_skills(roots: SkillRoots, warn: Callable[[str], None]) -> list[Skill]:
    """The skills in `roots`, at most MAX_SKILLS; what is left out is said through `warn`."""
    for folder in roots.untrusted:
        warn(f"warning: not loading the skills in {folder}: the repository is not trusted (pass --trust, or add it "
             "to trusted_projects)")
    skills: dict[str, Skill] = {}
    for root, confine in roots.roots:
        real_root = _inside(root, confine)
        if real_root is None:
            continue
        for entry in sorted(real_root.iterdir(), key=lambda p: p.name):
            skill = _read_skill(entry, real_root, root, warn)
            if skill is None:
                continue
            if skill.name in skills:
                warn(f"warning: skill {skill.name!r} in {root} is left out: {skills[skill.name].source} has one "
                     "by that name")
                continue
            if len(skills) == MAX_SKILLS:
                warn(f"warning: more than {MAX_SKILLS} skills; {entry} and the rest are left out")
                return list(skills.values())
            skills[skill.name] = skill
    return list(skills.values())


def _inside(folder: Path, confine: Path | None) -> Path | None:
    """The folder resolved, if it is a folder (and, with `confine`, inside that root)."""
    try:
        real = folder.resolve(strict=True)
        if not real.is_dir():
            return None
        if confine is not None and not real.is_relative_to(confine.resolve(strict=True)):
            return None
    except OSError:
        return None
    return real


def _read_skill(entry: Path, real_root: Path, root: Path, warn) -> Skill | None:
    folder = _inside(entry, real_root)  # a skill folder that is a symlink out of its skills folder is not one
    if folder is None:
        return None
    try:
        text = _read_confined(folder, "SKILL.md", BODY_CHARS * 4).decode("utf-8", errors="replace")
    except (OSError, ToolError):
        return None
    meta, _ = front_matter(text)
    name = str(meta.get("name") or entry.name).strip()
    description = " ".join(str(meta.get("description") or "").split())
    if not _NAME.fullmatch(name):
        warn(f"warning: skill in {entry} is left out: its name {name[:80]!r} is not letters, digits, '.', '-', '_'")
        return None
    if not description:
        warn(f"warning: skill {name!r} in {entry} is left out: its SKILL.md has no description")
        return None
    if len(description) > DESCRIPTION_CHARS:
        description = description[:DESCRIPTION_CHARS - 1] + "…"
    return Skill(name, description, folder, tool_list(meta.get("allowed-tools")), str(root))


def _read_confined(folder: Path, relative: str, limit: int) -> bytes:
    """Read folder/relative, which must be a regular file inside `folder` once every symlink is
    followed. ToolError says why not."""
    if not relative or "\0" in relative:
        raise ToolError("give the file's path relative to the skill's folder")
    path = Path(relative)
    if path.is_absolute() or ".." in path.parts:
        raise ToolError(f"{relative!r}: only a path inside the skill's folder can be read (no absolute path, no '..')")
    try:
        real = (folder / path).resolve(strict=True)
    except (OSError, RuntimeError):
        raise ToolError(f"{relative!r}: no such file in the skill's folder") from None
    if not real.is_relative_to(folder):
        raise ToolError(f"{relative!r} leads out of the skill's folder: not read")
    try:
        descriptor = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        raise ToolError(f"{relative!r}: cannot be read ({error.strerror})") from None
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ToolError(f"{relative!r} is not a file")
        return handle.read(limit)


def files_beside(skill: Skill) -> list[str]:
    """The files in the skill's folder besides SKILL.md (relative paths, those that stay inside)."""
    listed: list[str] = []
    for top, folders, files in os.walk(skill.folder):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in sorted(files):
            path = Path(top) / name
            relative = path.relative_to(skill.folder).as_posix()
            if relative == "SKILL.md" or name.startswith("."):
                continue
            try:
                if not path.resolve(strict=True).is_relative_to(skill.folder):
                    continue
            except (OSError, RuntimeError):
                continue
            listed.append(relative)
            if len(listed) >= MAX_LISTED:
                return listed
    return listed


def skill(context: ToolContext, name: str, file: str | None = None) -> str:
    skills: dict[str, Skill] = context.state.get("skills") or {}
    found = skills.get(name)
    if found is None:
        raise ToolError(f"no skill named {name!r}; the skills are: {', '.join(skills) or 'none'}")
    if file:
        data = _read_confined(found.folder, file, FILE_BYTES)
        more = "\n[... the rest of the file is left out]" if len(data) == FILE_BYTES else ""
        return f"{file} (of skill {name}):\n{data.decode('utf-8', errors='replace')}{more}"
    _, body = front_matter(_read_confined(found.folder, "SKILL.md", BODY_CHARS * 4).decode("utf-8", errors="replace"))
    body = body.strip()
    if len(body) > BODY_CHARS:
        body = body[:BODY_CHARS] + "\n[... the rest of SKILL.md is left out]"
    lines = [f"Skill {name}: {found.description}", "", body]
    if found.allowed_tools:
        lines += ["", f"This skill expects the tools: {', '.join(found.allowed_tools)}."]
    beside = files_beside(found)
    where = in_sandbox(context, found)
    if beside and where:
        lines += ["", f"The skill's files are in the sandbox, read-only, at {where}: run the commands this skill "
                  f"gives from there (e.g. `bash {where}/{beside[0]}` for its {beside[0]}), or read one with this "
                  "tool's `file` argument:", *(f"- {path}" for path in beside)]
    elif beside:
        lines += ["", "Files beside SKILL.md (they are not in the sandbox: read one with this tool's `file` "
                  "argument):", *(f"- {path}" for path in beside)]
    return "\n".join(lines)


def in_sandbox(context: ToolContext, found: Skill) -> str | None:
    """Where the sandbox has the skill's folder (None: it has not): its read-only mount in a Docker sandbox;
    the folder itself for a local sandbox, which runs on this machine."""
    sandbox = context.sandbox
    if getattr(sandbox, "kind", "") == "local":
        return str(found.folder)
    mounted = getattr(sandbox, "read_only", None)
    return mounted.get(str(found.folder)) if isinstance(mounted, dict) else None
