"""A repository's devcontainer as the sandbox's environment: `.devcontainer/devcontainer.json` (or
`.devcontainer.json`), its `image` or the `build.dockerfile` it builds (`context`, `args`, `target`),
then its `postCreateCommand` (a string, a list run without a shell, or an object of either).

Building one runs the repository's own commands, so the caller asks only for a trusted repository.
The file is read from git objects, as JSON with comments (`//`, `/* */`) and trailing commas, which
the stdlib's json reads once both are blanked out (positions kept, so errors name the right line).
The postCreateCommand runs at build time, with network, in a copy of the repository at /testbed that
is removed after: what it installs outside the workspace (tools, caches) stays in the image, as the
dependencies layer of a detected toolchain does. Each image is tagged by the hash of what defines it;
a failed build tags nothing and leaves none of its own intermediate images behind.
"""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import re
import shlex
import subprocess
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...git_args import end_of_options
from ...sandbox.engine import docker_client
from ...sandbox.images import image_exists
from ...sandbox.workspace import RepoSnapshot
from .layer import BUILD_LIMITS, Layer, LayerBuildError, build_layer

PATHS = (".devcontainer/devcontainer.json", ".devcontainer.json")
DOCKERFILE = ".codeagent-devcontainer.Dockerfile"  # the Dockerfile's copy in the build context
BUILD_TIMEOUT = 3600
TAIL_LINES = 5


class DevcontainerError(ValueError):
    """A devcontainer that cannot be used: its message is one line that says why."""


@dataclass(frozen=True)
class Devcontainer:
    path: str  # where in the repository
    image: str = ""
    dockerfile: str = ""  # repository-relative
    context: str = ""  # repository-relative folder ('' the top)
    args: tuple[tuple[str, str], ...] = ()
    target: str = ""
    post_create: str = ""  # a bash script ('' none)

    @property
    def what(self) -> str:
        built = f"image {self.image}" if self.image else f"build {self.dockerfile}"
        return built + (", postCreateCommand" if self.post_create else "")


def find(snap: RepoSnapshot) -> str | None:
    """The repository's devcontainer file, or None."""
    for path in PATHS:
        if _git(snap, "cat-file", "-e", *end_of_options(), f"{snap.commit}:{path}").returncode == 0:
            return path
    return None


def load(snap: RepoSnapshot, path: str) -> Devcontainer:
    """The devcontainer at `path`; raises DevcontainerError (one line) when it cannot be used."""
    raw = _git(snap, "show", *end_of_options(), f"{snap.commit}:{path}").stdout
    try:
        data = parse_jsonc(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as error:
        raise DevcontainerError(f"{path} is not UTF-8 text ({error.reason})") from None
    except json.JSONDecodeError as error:
        raise DevcontainerError(f"{path} is not valid JSON (line {error.lineno}, column {error.colno}: "
                                f"{error.msg})") from None
    if not isinstance(data, dict):
        raise DevcontainerError(f"{path}: a JSON object was expected")
    if data.get("dockerComposeFile"):
        raise DevcontainerError(f"{path}: a Docker Compose devcontainer is not supported (use `image` or "
                                "`build.dockerfile`, or set sandbox.image)")
    build = data.get("build") or {}
    if not isinstance(build, dict):
        raise DevcontainerError(f"{path}: `build` must be an object")
    image, dockerfile = data.get("image"), build.get("dockerfile") or data.get("dockerFile")
    if not (isinstance(image, str) and image) and not (isinstance(dockerfile, str) and dockerfile):
        raise DevcontainerError(f"{path} names neither an `image` nor a `build.dockerfile`")
    folder = posixpath.dirname(path)
    args = build.get("args") or {}
    if not isinstance(args, dict):
        raise DevcontainerError(f"{path}: `build.args` must be an object")
    post_create = _script(path, data.get("postCreateCommand"))
    if isinstance(dockerfile, str) and dockerfile:
        context = build.get("context", data.get("context", "."))
        return Devcontainer(path, dockerfile=_inside(path, folder, dockerfile), context=_inside(path, folder, str(context)),
                            args=tuple((str(k), str(v)) for k, v in args.items()), target=str(build.get("target") or ""),
                            post_create=post_create)
    return Devcontainer(path, image=str(image), post_create=post_create)


def prepare(found: Devcontainer, snap: RepoSnapshot, *, build: bool = True,
            log: Callable[[str], None] | None = None) -> str:
    """The tag of the devcontainer's image (its postCreateCommand run on top), built when missing
    (`build`=False: only the tag). Raises DevcontainerError or LayerBuildError (the last lines of the
    failing step)."""
    if found.image:
        tag = found.image
        if build and not image_exists(tag):
            _pull(tag, found.path)
    else:
        tag = _dockerfile_image(found, snap, build, log)
    if not found.post_create:
        return tag
    parent_id = docker_client().images.get(tag).id if build else tag  # the image, not its name, keys the layer
    script = f"cd /testbed\n{found.post_create}\ncd /\nrm -rf /testbed"
    layer = Layer(tag=f"codeagent/devcontainer-post:{_digest(parent_id, script, snap.tree)}", parent=tag,
                  script=script, network=True, tree=snap, timeout=BUILD_TIMEOUT)
    if build:
        if log and not image_exists(layer.tag):
            log(f"running the devcontainer's postCreateCommand ({found.path}; once per tree)…")
        build_layer(layer)
    return layer.tag


def parse_jsonc(text: str) -> Any:
    """JSON with comments and trailing commas (devcontainer.json's dialect)."""
    chars = list(text)
    for i, end in _outside_strings(text):  # blank out the comments (newlines kept: errors name the right line)
        if end > i + 1:
            chars[i:end] = [" " if ch != "\n" else ch for ch in text[i:end]]
    blanked = "".join(chars)
    for i, _end in _outside_strings(blanked):  # and the trailing commas
        if blanked[i] == "," and re.match(r"\s*[}\]]", blanked[i + 1:i + 4097]):
            chars[i] = " "
    return json.loads("".join(chars))


def _outside_strings(text: str):
    """(start, end) of each character outside JSON strings, and of each comment."""
    i, n = 0, len(text)
    while i < n:
        if text[i] == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            continue
        end = i + 1
        if text.startswith("//", i):
            end = text.find("\n", i) % (n + 1)  # -1: to the end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
        yield i, end
        i = end


def _script(path: str, command: Any) -> str:
    """postCreateCommand as a bash script: a string as it is, a list as one command (no shell), an
    object's values one after the other."""
    if command is None or command == "" or command == []:
        return ""
    if isinstance(command, str):
        return command
    if isinstance(command, list) and all(isinstance(part, str) for part in command):
        return shlex.join(command)
    if isinstance(command, dict):
        return "\n".join(_script(path, part) for part in command.values() if part)
    raise DevcontainerError(f"{path}: `postCreateCommand` must be a string, a list of strings or an object")


def _inside(path: str, folder: str, relative: str) -> str:
    joined = posixpath.normpath(posixpath.join(folder, relative))
    if joined.startswith("../") or joined == ".." or posixpath.isabs(relative):
        raise DevcontainerError(f"{path}: {relative!r} is outside the repository")
    return "" if joined == "." else joined


def _dockerfile_image(found: Devcontainer, snap: RepoSnapshot, build: bool, log: Callable[[str], None] | None) -> str:
    dockerfile = _git(snap, "show", *end_of_options(), f"{snap.commit}:{found.dockerfile}")
    if dockerfile.returncode != 0:
        raise DevcontainerError(f"{found.path}: its Dockerfile {found.dockerfile} is not in the repository")
    context = _git(snap, "rev-parse", "--verify", *end_of_options("rev-parse"), f"{snap.commit}:{found.context}").stdout.decode().strip()
    if not context:
        raise DevcontainerError(f"{found.path}: its build context {found.context or '.'} is not a folder")
    tag = f"codeagent/devcontainer:{_digest(context, dockerfile.stdout.decode(errors='replace'), found.args, found.target)}"
    if not build or image_exists(tag):
        return tag
    if log:
        log(f"building the devcontainer's image ({found.dockerfile}; once)…")
    archive = _git(snap, "archive", "--format=tar", *end_of_options(), f"{snap.commit}:{found.context}" if found.context else snap.commit)
    buffer = io.BytesIO(archive.stdout)
    with tarfile.open(fileobj=buffer, mode="a") as tar:
        info = tarfile.TarInfo(DOCKERFILE)
        info.size = len(dockerfile.stdout)
        tar.addfile(info, io.BytesIO(dockerfile.stdout))
    buffer.seek(0)
    lines: list[str] = []
    created: list[str] = []
    stream = docker_client().api.build(
        fileobj=buffer, custom_context=True, dockerfile=DOCKERFILE, tag=tag, buildargs=dict(found.args),
        target=found.target or None, rm=True, forcerm=True, network_mode="bridge", decode=True, timeout=BUILD_TIMEOUT,
        labels={"codeagent.devcontainer": found.path},
        # the builder's containers take no capability options: the build limits at least (layer.py)
        container_limits={"memory": _bytes(BUILD_LIMITS.memory), "memswap": _bytes(BUILD_LIMITS.memory)})
    error = ""
    for chunk in stream:
        for line in str(chunk.get("stream") or "").splitlines():
            _note_new_image(line, lines, created)
            lines.append(line)
        if chunk.get("error"):
            error = str(chunk["error"]).strip()
    if error or not image_exists(tag):
        for image in reversed(created):  # this build's own steps: nothing half-built stays cached
            try:
                docker_client().images.remove(image, noprune=False)
            except Exception:  # noqa: BLE001 - shared with another build, or already gone
                pass
        said = [line for line in lines if line.strip() and not re.match(r"\s*--->|Removing intermediate container", line)]
        tail = said[-TAIL_LINES:] + ([error] if error and error not in said else [])
        raise LayerBuildError(tag, "\n".join(tail) or "the build produced no image")
    return tag


def _note_new_image(line: str, lines: list[str], created: list[str]) -> None:
    """An image a build step of this run made (` ---> <id>` not after `Using cache`, nor the FROM's)."""
    match = re.fullmatch(r"\s*---> ([0-9a-f]{12,})\s*", line)
    if not match:
        return
    previous = next((text for text in reversed(lines) if text.strip()), "")
    step = next((text for text in reversed(lines) if text.startswith("Step ")), "")
    if "Using cache" not in previous and not re.match(r"Step \d+/\d+ : FROM ", step, re.IGNORECASE):
        created.append(match.group(1))


def _pull(image: str, path: str) -> None:
    from docker.errors import DockerException

    try:
        docker_client().images.pull(image)
    except DockerException as error:
        first = (str(error).splitlines() or [type(error).__name__])[0][:200]
        raise DevcontainerError(f"{path}: the image {image} is not here and could not be pulled ({first})") from None


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _git(snap: RepoSnapshot, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", f"--git-dir={snap.git_dir}", *args], capture_output=True)


def _bytes(size: str) -> int:
    """`8g` -> bytes (the engine's build API wants a number)."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = size.strip().lower()
    return int(float(text[:-1]) * units[text[-1]]) if text[-1:] in units else int(text)
