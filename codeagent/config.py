"""Configuration: defaults < user file < project file < --config file < command-line flags.

User file: ~/.config/codeagent/config.yaml (or $CODEAGENT_CONFIG). Project file: .codeagent.yaml
at the repository root. Unknown keys are errors that name the file and the key.

The project file is the repository's word, not the user's: until the user trusts the repository
(`--trust`, `trusted_projects` in the user file, or the TUI's question) it may set only the keys in
REPOSITORY_MAY_SET; the others are ignored with a warning.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, cast

import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from .nested import Conflict, deep_merge, put

PROJECT_FILE = ".codeagent.yaml"

# What an untrusted repository's .codeagent.yaml may set: how the work is done, never whom it talks
# to (model name, endpoint), where it runs or what it can reach (sandbox, mounts, network, image),
# what the host reads or writes (prompts_dir, trajectories_dir), how many runs it pays for
# (candidates, attempts, models), what is left out of the patch (patch_exclude, scratch_dir: "*.py" would
# drop the agent's fix in silence) or whom it trusts. Any key not listed, present or future, needs trust.
# "lower": the repository may tighten the limit the user has, not raise it.
REPOSITORY_MAY_SET: dict[str, Literal["any", "lower"]] = {
    "limits.max_steps": "lower",
    "limits.max_cost": "lower",
    "limits.max_seconds": "lower",
    "limits.max_format_errors": "any",
    "limits.command_timeout": "any",
    "limits.max_patch_bytes": "lower",
    "limits.max_tool_calls": "lower",
    "limits.max_tool_calls_per_reply": "lower",
    "model.temperature": "any",
    "model.top_p": "any",
    "model.max_tokens": "any",
    "model.seed": "any",
    "model.native_tools": "any",
    "model.context_tokens": "any",
    "agent.tools": "any",
    "agent.review_on_submit": "any",
    "agent.observation_chars": "any",
    "agent.localize": "any",
    "scaling.temperatures": "any",
    "scaling.seeds": "any",
    "scaling.verifiers": "any",
    "scaling.policy": "any",
    "scaling.top_k": "any",
    "scaling.test_command": "any",
}


class ConfigError(ValueError):
    pass


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


_DOCKER_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([bkmg]?)b?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_MIN_MEMORY = 6 * 1024**2  # Docker's own minimum; 0 would mean no limit at all


def _docker_size(value: str) -> str:
    match = _DOCKER_SIZE.fullmatch(value.strip())
    if not match:
        raise ValueError(f"{value!r} is not a size such as 512m or 4g")
    if float(match[1]) * _SIZE_UNITS[match[2].lower()] < _MIN_MEMORY:
        raise ValueError(f"{value!r} is below Docker's minimum of 6m")
    return value.strip()


DockerSize = Annotated[str, BeforeValidator(lambda v: str(v) if isinstance(v, int) and not isinstance(v, bool) else v),
                       AfterValidator(_docker_size)]
Positive = Annotated[int, Field(ge=1)]


class ModelSettings(_Section):
    name: str | None = None  # litellm model id (e.g. openai/gpt-4o), or replay:PATH
    timeout: float = 300.0  # seconds one request to the model may take (> 0)
    total_timeout: float = 900.0  # seconds one model call may take, every retry included (> 0)
    api_base: str | None = None
    temperature: float = Field(0.0, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: Positive | None = None
    seed: int | None = None
    native_tools: bool = True  # False: tool calls are written in the reply text
    stream: bool = True  # stream replies (text shown as it forms); served models are never streamed
    context_tokens: Positive = 128_000
    retries: int = Field(4, ge=0)


class LimitSettings(_Section):
    max_steps: Positive = 60
    max_cost: float = Field(3.0, gt=0)  # dollars; unknown prices count as zero
    max_seconds: float = Field(3600.0, gt=0)
    max_format_errors: Positive = 3  # in a row
    command_timeout: float = Field(300.0, gt=0)
    max_patch_bytes: Positive = 5_000_000  # a bigger final patch is not stored; the run ends as patch_too_large
    max_tool_calls: Positive = 1000  # in one run (a TUI turn, a resumed run); then it ends as max_tool_calls
    max_tool_calls_per_reply: Positive = 32  # the reply's further calls are not run (each is told so)


class SandboxSettings(_Section):
    kind: Literal["docker", "local"] = "docker"
    image: str | None = None
    network: bool = False
    memory: DockerSize = "4g"
    pids: int = Field(1024, ge=1)  # 0 or less: no limit to Docker
    cpus: float = Field(2.0, gt=0)  # 0: no limit to Docker
    disk: DockerSize = "4g"  # cap on the files a sandbox writes (its container's writable layer)


class AgentSettings(_Section):
    tools: list[str] = []  # empty: every tool in tools/
    prompts_dir: str | None = None  # templates here override prompts/
    scratch_dir: str = ".codeagent-scratch"
    patch_exclude: list[str] = []  # globs left out of the final patch, besides scratch_dir
    review_on_submit: bool = False
    observation_chars: Positive = 12_000
    localize: bool = True  # add ranked candidate files to the first prompt
    mode: Literal["normal", "plan"] = "normal"  # plan: read-only tools, a plain answer ends the run (agent/modes.py)
    write_through: bool = False  # each change the agent makes is written to your working tree at once
    # The `subagent` tool (agent/subagents.py): a sub-task run in its own sandbox, a copy of the current one.
    # Offered only when on; none of these may come from an untrusted repository (they pay for runs).
    subagents: bool = False
    subagent_model: str | None = None  # default: the configured model
    subagent_max_depth: int = Field(1, ge=0)  # 1: a subagent cannot start subagents
    subagent_steps: Positive = 60  # all of one run's subagents together
    subagent_parallel: Positive = 2  # running at once


class ScalingSettings(_Section):
    candidates: Positive = 1
    max_parallel: Positive = 4  # candidates running at once
    temperatures: list[float] = [0.0, 0.6, 0.8, 1.0]  # cycled over candidates
    seeds: list[int] = []  # cycled; empty: no seed
    models: list[str] = []  # cycled; empty: the configured model
    verifiers: list[Literal["regression", "reproduction", "judge"]] = ["regression", "reproduction", "judge"]
    policy: Literal["hybrid", "vote", "judge", "tests", "random"] = "hybrid"
    top_k: Positive = 3  # hybrid: how many the judge keeps before the tests decide
    judge_model: str | None = None  # default: the configured model
    attempts: Positive = 1  # serial scaling: >1 lets a candidate that fails verification try again
    test_command: str | None = None  # regression tests for `solve` (default: the task's own)


class McpServer(_Section):
    """One MCP server: `command` (stdio, a process on the host) or `url` (streamable HTTP)."""

    command: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}  # added to the SDK's default environment (PATH, HOME, ...)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = {}
    enabled: bool = True

    def model_post_init(self, _context: Any) -> None:
        if (self.command is None) == (self.url is None):
            raise ValueError("an MCP server needs either `command` (stdio) or `url` (streamable HTTP)")



class McpSettings(_Section):
    servers: dict[str, McpServer] = {}
    connect_timeout: float = Field(20.0, gt=0)  # seconds a server may take to start and list its tools
    call_timeout: float = Field(120.0, gt=0)  # seconds one tool call may take


class WebFetchSettings(_Section):
    """The web_fetch tool (tools/web_fetch.py): offered only when `allow` names a host. The user's word
    only (not in REPOSITORY_MAY_SET): it decides what the host reaches."""

    allow: list[str] = []  # host names, "*.example.org" (its subdomains), or IP addresses
    max_bytes: Positive = 2_000_000  # of one response body; more is cut, with a note
    timeout: float = Field(20.0, gt=0)  # seconds for one fetch, redirects included


class HookCommand(_Section):
    type: Literal["command"] = "command"
    command: str  # run by the shell on the host; the event comes as JSON on stdin, never in this line
    timeout: float | None = Field(None, gt=0)  # seconds; default: hooks.timeout


class HookMatcher(_Section):
    matcher: str = ""  # a regex on the tool name (PreToolUse/PostToolUse) or source (SessionStart); "" or "*": all
    hooks: list[HookCommand] = []


class HookSettings(_Section):
    """The Claude Code hook contract: event name -> matchers -> commands."""

    timeout: float = Field(60.0, gt=0)
    PreToolUse: list[HookMatcher] = []
    PostToolUse: list[HookMatcher] = []
    UserPromptSubmit: list[HookMatcher] = []
    Stop: list[HookMatcher] = []
    SessionStart: list[HookMatcher] = []


class ImageSettings(_Section):
    """Where eval/grade environments come from (harness/prebuilt.py)."""
    source: Literal["build", "official"] = "build"  # official: pull the SWE-bench harness's images
    namespace: str = "swebench"  # of the official images
    registry: str = ""  # a registry mirror (host[:port][/path]) every prebuilt image is pulled through


class Config(_Section):
    model: ModelSettings = ModelSettings()
    limits: LimitSettings = LimitSettings()
    sandbox: SandboxSettings = SandboxSettings()
    agent: AgentSettings = AgentSettings()
    scaling: ScalingSettings = ScalingSettings()
    mcp: McpSettings = McpSettings()  # never from an untrusted repository: servers run on the host
    hooks: HookSettings = HookSettings()  # never from an untrusted repository: hooks run on the host
    web_fetch: WebFetchSettings = WebFetchSettings()  # never from an untrusted repository: the host fetches
    images: ImageSettings = ImageSettings()
    trajectories_dir: str | None = None  # None: $CODEAGENT_TRAJECTORY_DIR or ~/.codeagent/trajectories
    trusted_projects: list[str] = []  # repositories whose .codeagent.yaml may set anything

    def recorded(self) -> dict[str, Any]:
        """The config as a trajectory keeps it: MCP servers' env and headers (tokens) name their keys
        only, and the tokens in their `url` and `args` are hidden. (A plain dump keeps them: eval
        workers rebuild the config from it.)"""
        data = self.model_dump(mode="json")
        for server in data["mcp"]["servers"].values():
            for field in ("env", "headers"):
                server[field] = {key: HIDDEN for key in server[field]}
            server["args"] = hide_secret_args(server["args"])
            if server["url"]:
                server["url"] = hide_secret_url(server["url"])
        return data

    def trajectory_root(self) -> Path | None:
        return Path(os.path.expanduser(self.trajectories_dir)) if self.trajectories_dir else None

    def patch_exclude(self) -> list[str]:
        return [f"{self.agent.scratch_dir.rstrip('/')}/*", *self.agent.patch_exclude]


HIDDEN = "<hidden>"
# A flag, query key or NAME=value whose name says it carries a secret.
_SECRET_NAME = re.compile(r"key|token|secret|passw|pwd|auth|credential|bearer|session|signature|sig$", re.I)


def hide_secret_args(args: list[str]) -> list[str]:
    """`--api-key X`, `--token=X`, `-e GITHUB_TOKEN=X`, `--header "Authorization: Bearer X"`, a URL's
    password or token: the value is hidden, the name kept."""
    out: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next:
            out.append(HIDDEN)
            hide_next = False
            continue
        name, equals, value = arg.partition("=")
        header, colon, _ = arg.partition(":")
        if equals and "://" not in name and _SECRET_NAME.search(name):
            out.append(f"{name}={HIDDEN}")
        elif equals and "://" not in name and "://" in value:
            out.append(f"{name}={hide_secret_url(value)}")
        elif "://" in arg:
            out.append(hide_secret_url(arg))
        elif colon and re.fullmatch(r"[\w-]+", header) and _SECRET_NAME.search(header):
            out.append(f"{header}: {HIDDEN}")
        else:
            out.append(arg)
            hide_next = arg.startswith("-") and bool(_SECRET_NAME.search(arg))
    return out


def hide_secret_url(url: str) -> str:
    """user:password@ and the values of query keys that name a secret (api_key, token, ...) are hidden."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return HIDDEN  # not a URL we can take apart: keep none of it
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"
    if port is not None:
        netloc = f"{netloc}:{port}"
    if parts.username is not None:
        userinfo = HIDDEN if parts.password is None else f"{parts.username}:{HIDDEN}"
        netloc = f"{userinfo}@{netloc}"
    query = urlencode([(key, HIDDEN if _SECRET_NAME.search(key) else value)
                       for key, value in parse_qsl(parts.query, keep_blank_values=True)], safe="<>")
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))  # a fragment can carry a token too


def user_config_path() -> Path:
    return Path(os.environ.get("CODEAGENT_CONFIG") or os.path.expanduser("~/.config/codeagent/config.yaml"))


def user_config_folder() -> Path:
    """The folder of the user's config file: its commands/ and skills/ are the user's own."""
    return user_config_path().parent


def repository_trusted(config: Config, repo: str | Path | None) -> bool:
    """Whether `repo` is trusted: in trusted_projects (load_config adds it there for --trust)."""
    return repo is not None and Path(repo).is_dir() and _trusted(Path(repo), [{"trusted_projects": config.trusted_projects}])


def load_config(repo: str | Path | None = None, config_file: str | Path | None = None,
                overrides: dict[str, Any] | None = None, *, trust: bool = False,
                warn: Callable[[str], None] | None = None) -> Config:
    """trust: the user trusts `repo` (--trust). Settings an untrusted project file may not set are
    left out and `warn` (default: stderr) gets one line naming them."""
    config, project, ignored = _load(repo, config_file, overrides, trust)
    if ignored:
        (warn or _to_stderr)(
            f"warning: ignoring {', '.join(ignored)} from {project}: only a trusted repository may set "
            f"{'it' if len(ignored) == 1 else 'them'} (pass --trust, or add the repository to trusted_projects "
            f"in {user_config_path()})")
    if trust and repo is not None and Path(repo).is_dir() and not repository_trusted(config, repo):
        config.trusted_projects.append(str(Path(repo).resolve()))  # what the repository's folders are read by
    return config


def untrusted_settings(repo: str | Path | None, config_file: str | Path | None = None,
                       overrides: dict[str, Any] | None = None) -> list[str]:
    """The project file's settings that need trust and would be ignored now ([]: nothing to ask)."""
    return _load(repo, config_file, overrides, trust=False)[2]


def trust_project(repo: str | Path) -> Path:
    """Add `repo` to trusted_projects in the user file; the rest of the file (comments too) stays."""
    path = user_config_path()
    entry = str(Path(repo).resolve())
    data = _read(path) if path.is_file() else {}
    trusted = data.get("trusted_projects") or []
    if not isinstance(trusted, list):
        raise ConfigError(f"{path}: trusted_projects must be a list of paths")
    if entry in trusted:
        return path
    wanted = {**data, "trusted_projects": [*trusted, entry]}
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    item = "- " + yaml.safe_dump(entry, default_style="'").splitlines()[0] + "\n"
    if "trusted_projects" not in data:
        text += ("" if not text or text.endswith("\n") else "\n") + "trusted_projects:\n" + item
    else:  # an existing block list gets the entry at its end; anything else is written anew
        block = re.search(r"^trusted_projects:[ \t]*(#.*)?\n((?:[ \t]*-.*\n|[ \t]*#.*\n)*)", text, re.MULTILINE)
        indent = re.search(r"^([ \t]*)-", block[2], re.MULTILINE) if block else None
        text = text[:block.end()] + (indent[1] if indent else "") + item + text[block.end():] if block else ""
    try:
        edited = yaml.safe_load(text) == wanted
    except yaml.YAMLError:
        edited = False
    if not edited:
        text = yaml.safe_dump(wanted, sort_keys=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _load(repo, config_file, overrides, trust) -> tuple[Config, Path | None, list[str]]:
    user = [(str(path), _read(path)) for path in [user_config_path()] if path.is_file()]
    later = []
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise ConfigError(f"config file {config_file} does not exist")
        later.append((str(path), _read(path)))
    later.append(("the command line", overrides or {}))
    merged: dict[str, Any] = {}
    for source, layer in user:
        _merge_checked(merged, layer, source)
    project = Path(repo) / PROJECT_FILE if repo is not None and Path(repo).is_dir() else None
    ignored: list[str] = []
    if project is not None and project.is_file():
        layer = _read(project)
        _merge_checked(dict(merged), layer, str(project))  # errors name the file even for ignored keys
        if not trust and not _trusted(Path(repo), [data for _, data in user + later]):
            layer, ignored = _repository_part(merged, layer)
        _merge_checked(merged, layer, str(project))
    for source, layer in later:
        _merge_checked(merged, layer, source)
    return Config.model_validate(merged), project, ignored


def _trusted(repo: Path, layers: list[dict[str, Any]]) -> bool:
    here = repo.resolve()
    for layer in layers:
        for entry in layer.get("trusted_projects") or []:
            if isinstance(entry, str) and Path(os.path.expanduser(entry)).resolve() == here:
                return True
    return False


def _repository_part(merged: dict[str, Any], layer: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The part of an untrusted project layer it may set, and the dotted keys left out."""
    before = Config.model_validate(merged)
    after = Config.model_validate(deep_merge(dict(merged), layer))
    kept: dict[str, Any] = {}
    ignored: list[str] = []
    for key, value in layer.items():
        leaves = value.items() if isinstance(value, dict) and key in Config.model_fields else [(None, value)]
        for leaf, leaf_value in leaves:
            dotted = key if leaf is None else f"{key}.{leaf}"
            rule = REPOSITORY_MAY_SET.get(dotted)
            if rule == "lower":
                section = key
                if getattr(getattr(after, section), cast(str, leaf)) > getattr(getattr(before, section), cast(str, leaf)):
                    rule = None
            if rule is None:
                ignored.append(dotted)
            elif leaf is None:
                kept[key] = leaf_value
            else:
                kept.setdefault(key, {})[leaf] = leaf_value
    return kept, ignored


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr)


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """`section.key=value` pairs (values parsed as YAML) into a nested dict."""
    result: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(parts):
            raise ConfigError(f"--set {pair!r} is not of the form section.key=value")
        try:
            put(result, parts, yaml.safe_load(raw))
        except Conflict as conflict:
            raise ConfigError(f"--set {pair!r}: {conflict.part} is given a value and keys at once") from None
        except yaml.YAMLError:
            raise ConfigError(f"--set {pair!r}: the value is not valid YAML (quote it)") from None
    return result


def flag_overrides(settings: list[str], **flags: Any) -> dict[str, Any]:
    """`--set` pairs plus the command's own flags ({"model.name": value, ...}; None means unset)."""
    overrides = parse_overrides(settings)
    for dotted, value in flags.items():
        if value is None or value == "":
            continue
        section, _, key = dotted.partition("__")
        overrides.setdefault(section, {})[key] = value
    return overrides


def _read(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        problem = str(exc).replace("\n", " ")
        raise ConfigError(f"config file {path} is not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of sections, not {type(data).__name__}")
    return data


def _merge_checked(into: dict[str, Any], layer: dict[str, Any], source: str) -> None:
    try:
        Config.model_validate(deep_merge(dict(into), layer))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg'].removeprefix('Value error, ')}"
                             for e in exc.errors())
        raise ConfigError(f"{source}: {problems}") from None
    deep_merge(into, layer)
