"""The config's sections and `Config` itself: pydantic models that refuse unknown keys, with the defaults."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from .redact import HIDDEN, hide_secret_args, hide_secret_url


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
    repository_history: bool = True  # solve: your branches' history in the sandbox (run/history.py); false seals
    # it as eval and training always are
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
    policy: Literal["hybrid", "vote", "judge", "tests", "random", "tournament"] = "hybrid"
    top_k: Positive = 3  # hybrid: how many the judge keeps before the tests decide
    judge_model: str | None = None  # default: the configured model
    attempts: Positive = 1  # serial scaling: >1 lets a candidate that fails verification try again
    test_command: str | None = None  # regression tests for `solve` (default: the task's own)
    # How the candidates come about (scaling/methods.py): sampled side by side, evolved in rounds, or grown as a
    # search tree; all under one budget: generated tokens and/or model calls (steps) of every model call the
    # method makes (runs, judges); neither set: `candidates` runs.
    tts: Literal["sample", "evolve", "search"] = "sample"
    budget_tokens: Positive | None = None
    budget_steps: Positive | None = None
    population: Positive = 4  # evolve: runs per round
    parents: Positive = 2  # evolve: the best distinct candidates a round shows the next one
    exploration: float = Field(1.0, ge=0)  # search: the UCT constant (0: always the best-valued state)
    agree: int = Field(0, ge=0)  # stop early once this many independent candidates agree and pass (0: never)


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


_ALLOW_ENTRY = re.compile(r"((\*\.)?[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])(:(\d{1,5}|\*))?|[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*")


def _allow_entry(entry: str) -> str:
    match = _ALLOW_ENTRY.fullmatch(entry.strip())
    if not match or match.group(4) and match.group(4) != "*" and not 0 < int(match.group(4)) < 65536:
        raise ValueError(f"web_fetch.allow: {entry!r} is not a host, host:PORT, host:* or an IP address "
                         "(`docs.python.org`, `*.readthedocs.io`, `127.0.0.1:8000`, `[::1]:8000`)")
    return entry


class WebFetchSettings(_Section):
    """The web_fetch tool (tools/web_fetch.py): offered only when `allow` names a host. The user's word
    only (not in REPOSITORY_MAY_SET): it decides what the host reaches."""

    # host names, "*.example.org" (its subdomains), or IP addresses; bare, an entry admits the scheme's default
    # port only (80, 443): "127.0.0.1:8000" names its port, "host:*" any port
    allow: list[Annotated[str, AfterValidator(_allow_entry)]] = []
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
    """Where eval/grade environments come from (harness/images/prebuilt.py)."""
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

