"""`codeagent doctor`: is this machine and this folder ready for `codeagent solve`?

Each check says ok, warn or fail, what it found, and for anything not ok what to do. The checks
are cheap: the Docker engine is asked for its version, the base image looked up, the model's key
looked for and its server asked once (`GET …/models`, a short timeout; nothing is generated), git
asked about the folder, and the free disk measured.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from ..config import Config, user_config_path

OK, WARN, FAIL = "ok", "warn", "fail"
GIB = 1024**3
DISK_FAIL, DISK_WARN = 2 * GIB, 10 * GIB  # an environment image is ~0.5-1 GiB; a few instances need several
# Hosted providers whose model list answers a GET with the key (free; proves the key and the route).
PROVIDERS = {"openai": ("https://api.openai.com/v1/models", "OPENAI_API_KEY", "Authorization", "Bearer "),
             "anthropic": ("https://api.anthropic.com/v1/models", "ANTHROPIC_API_KEY", "x-api-key", "")}


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""


def run_checks(folder: Path, config: Config, timeout: float = 5.0) -> list[Check]:
    docker = check_docker(config)
    return [docker, check_image(config, docker), *check_model(config, timeout), check_git(folder),
            check_disk(folder, docker)]


def check_docker(config: Config) -> Check:
    from ..sandbox import DockerUnavailable
    from ..sandbox.engine import docker_client

    if config.sandbox.kind == "local":
        return Check("docker", WARN, "not used: sandbox.kind is local (commands run on this machine, NO isolation)",
                     "set sandbox.kind: docker (the default) to run the agent in a container")
    try:
        version = docker_client().version()
    except DockerUnavailable as exc:
        return Check("docker", FAIL, str(exc).split(". ")[0], "start the engine (`sudo systemctl start docker` or "
                     "`sudo dockerd &`), or install it (`bash scripts/setup.sh`)")
    except Exception as exc:  # the engine answered the ping but not this
        return Check("docker", FAIL, f"the engine did not tell its version: {exc}", "restart the Docker engine")
    return Check("docker", OK, f"engine {version.get('Version', '?')} answers (API {version.get('ApiVersion', '?')})")


def check_image(config: Config, docker: Check) -> Check:
    if config.sandbox.kind == "local":
        return Check("base image", OK, "not needed with sandbox.kind local")
    from ..sandbox.images import base_image_tag, image_exists

    tag = config.sandbox.image or base_image_tag()
    if docker.status != OK:
        return Check("base image", FAIL, f"{tag}: not checked (no Docker engine)", "fix Docker first")
    if image_exists(tag):
        return Check("base image", OK, f"{tag} is there")
    fix = ("pull or build it (it is sandbox.image in your config)" if config.sandbox.image
           else "`codeagent sandbox build` (pulls python:slim, or bootstraps it from Debian packages: ~1 min)")
    return Check("base image", FAIL, f"{tag} is missing", fix)


def check_model(config: Config, timeout: float) -> list[Check]:
    from ..models import ModelConfigError, model_from_settings

    name, api_base = config.model.name, config.model.api_base
    if not name:
        return [Check("model", FAIL, "no model configured", f"pass --model NAME, or set model.name in "
                      f"{user_config_path()} (README: Quick start)")]
    if name.startswith(("replay:", "hf:")):
        return [Check("model", OK, f"{name} (runs here: no server, no key)")]
    try:
        model_from_settings(config.model).check()  # type: ignore[attr-defined]  # a served model: LiteLLMModel
    except ModelConfigError as exc:
        return [Check("model", FAIL, str(exc).split(": set it")[0], _key_fix(str(exc)))]
    where = f" at {api_base}" if api_base else ""
    return [Check("model", OK, f"{name}{where}: configured" + ("" if api_base else ", key present")),
            check_reachable(name, api_base, timeout)]


def _key_fix(message: str) -> str:
    if "export " in message:
        return "export " + message.split("export ")[1].split(")")[0] + " (or put it in your shell's profile)"
    return "name the model as provider/model (openai/gpt-4o, hosted_vllm/NAME with --api-base ...)"


def check_reachable(name: str, api_base: str | None, timeout: float) -> Check:
    """One GET of the server's model list; an OpenAI-compatible server (vLLM, Ollama, LM Studio...)
    answers it at api_base, and the hosted providers in PROVIDERS at their own address."""
    provider = name.split("/")[0] if "/" in name else ("anthropic" if name.startswith("claude") else "openai")
    if api_base:  # a key goes only where the model's own calls would send it
        key = {"openai": "OPENAI_API_KEY", "hosted_vllm": "HOSTED_VLLM_API_KEY"}.get(provider, "")
        url, header, prefix = api_base.rstrip("/") + "/models", "Authorization", "Bearer "
    elif provider in PROVIDERS:
        url, key, header, prefix = PROVIDERS[provider]
    else:
        return Check("model server", OK, f"not checked for provider {provider!r} (only OpenAI-compatible servers, "
                     "OpenAI and Anthropic are asked)")
    request = urllib.request.Request(url, headers={header: prefix + os.environ[key]} if key and os.environ.get(key) else {})
    if provider == "anthropic" and not api_base:
        request.add_header("anthropic-version", "2023-06-01")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (the user's own endpoint)
            listed = response.read(1 << 20)
            exact = "" if not api_base or provider == "hosted_vllm" else _token_exact_note(listed)
            return Check("model server", OK, f"{url} answers (HTTP {response.status}){exact}")
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return Check("model server", FAIL, f"{url} refused the key (HTTP {exc.code})", f"check {key or 'its key'}")
        return Check("model server", WARN, f"{url} answered HTTP {exc.code}", "check the address (it should end "
                     "in /v1 for an OpenAI-compatible server)")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return Check("model server", FAIL, f"cannot reach {url}: {_why_unreachable(exc, timeout)}",
                     "start the server (e.g. `vllm serve NAME` or `ollama serve`), or fix --api-base / model.api_base")


def _why_unreachable(error: BaseException, timeout: float) -> str:
    """A refused connection, a name that does not resolve and a timeout, each in its own words."""
    reason = getattr(error, "reason", error)
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (nothing listens at that address and port)"
    if isinstance(reason, socket.gaierror):
        return f"the host name does not resolve ({reason.strerror or reason})"
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return f"no answer within {timeout:g}s"
    return str(reason)


def _token_exact_note(listed: bytes) -> str:
    """Said here rather than at each run: a server that is not codeagent serve or vLLM gives no token ids."""
    from ..models.litellm_wire import TOKEN_ID_SERVERS

    try:
        entries = json.loads(listed).get("data") or []
    except (ValueError, AttributeError):
        entries = []
    if any(isinstance(entry, dict) and entry.get("owned_by") in TOKEN_ID_SERVERS for entry in entries):
        return "; it gives token ids: runs are token-exact"
    return ("; not codeagent serve or vLLM: its runs record no token ids (fine for solving; RL training wants "
            "token-exact runs: serve the model with `codeagent serve` or vLLM)")


def check_git(folder: Path) -> Check:
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True)

    if git("rev-parse", "--is-inside-work-tree").stdout.strip() != "true":  # solve works on a plain folder
        return Check("git", OK, f"{folder} is not a git repository: solve works on its files as they are (its "
                     ".gitignore respected); the agent gets no history")
    head = git("rev-parse", "--short", "HEAD")
    if head.returncode != 0:
        return Check("git", WARN, f"{folder}: a git repository with no commit yet", "commit once: `git add -A && "
                     "git commit -m start`")
    branch = git("branch", "--show-current").stdout.strip() or "detached HEAD"
    changed = [line for line in git("status", "--porcelain").stdout.splitlines() if line.strip()]
    if changed:
        return Check("git", WARN, f"{folder}: {branch} at {head.stdout.strip()}, {len(changed)} uncommitted "
                     f"change(s)", "commit or stash them before `--apply` or /apply, which refuse to overwrite "
                     "files you changed")
    return Check("git", OK, f"{folder}: {branch} at {head.stdout.strip()}, clean")


def check_disk(folder: Path, docker: Check) -> Check:
    places = {"this folder": folder}
    if docker.status == OK:
        from ..sandbox.engine import docker_client

        try:
            root = Path(docker_client().info().get("DockerRootDir", ""))
            if root.is_dir():
                places["Docker's images"] = root
        except Exception:
            pass
    free = {what: shutil.disk_usage(path).free for what, path in places.items()}
    what, least = min(free.items(), key=lambda item: item[1])
    detail = ", ".join(f"{f / GIB:.1f} GiB free for {place}" for place, f in free.items())
    if least < DISK_FAIL:
        return Check("disk", FAIL, detail, f"free some space for {what} (`codeagent sandbox prune --images` removes "
                     "codeagent's cached workspace images)")
    if least < DISK_WARN:
        return Check("disk", WARN, detail, f"less than {DISK_WARN // GIB} GiB for {what}: eval environments need "
                     "several GiB")
    return Check("disk", OK, detail)


def report(checks: list[Check]) -> str:
    width = max(len(check.name) for check in checks)
    lines = []
    for check in checks:
        lines.append(f"{check.status:<5} {check.name:<{width}}  {check.detail}")
        if check.fix and check.status != OK:
            lines.append(f"{'':<5} {'':<{width}}  → {check.fix}")
    problems = sum(check.status != OK for check in checks)
    lines.append("all good: `codeagent` in a repository to start" if not problems
                 else f"{problems} to look at (→ says what to do)")
    return "\n".join(lines)


def as_json(checks: list[Check]) -> str:
    return json.dumps({"ok": all(check.status == OK for check in checks), "checks": [asdict(c) for c in checks]})
