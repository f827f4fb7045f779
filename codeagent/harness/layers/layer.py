"""Image layers built by running a script in a container and committing it (base -> system -> env ->
deps -> instance, python_env.py), or built on another image and written over the parent (carry.py).

A layer's tag is derived from the hash of everything that defines it, so an unchanged layer is
never built twice (a second run builds nothing), and a file lock per tag keeps parallel workers
from building the same layer at once.

Every build container has the sandbox's confinement (sandbox/docker.py): its few capabilities (no
NET_RAW, no MKNOD...), no new privileges, and a memory, swap, pids and CPU limit (BUILD_LIMITS: more
memory than a sandbox's, compilers need it). A layer without `network` has none at all.
"""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...locks import file_lock
from ...sandbox.docker import CAPABILITIES, owner_labels
from ...sandbox.engine import docker_client
from ...sandbox.errors import SandboxError
from ...sandbox.images import image_exists
from ...sandbox.workspace import INIT_REPO_SCRIPT, RepoSnapshot, cache_dir
from .carry import carry_over, changes_outside

BUILD_LABEL = "codeagent.sandbox"  # build containers carry the sandbox label, so prune finds leftovers
NOTE_LABEL = "codeagent.note."  # + a note's name: what a layer's own recipe said it installed (notes_from)
MAX_NOTE = 2000


@dataclass(frozen=True)
class BuildLimits:
    memory: str = os.environ.get("CODEAGENT_BUILD_MEMORY", "8g")
    pids: int = 4096
    cpus: float = float(os.cpu_count() or 2)


BUILD_LIMITS = BuildLimits()


class LayerBuildError(SandboxError):
    def __init__(self, tag: str, message: str, log_path: Path | None = None, output: bytes = b""):
        where = f" (build log: {log_path})" if log_path else ""
        super().__init__(f"building {tag} failed: {message}{where}")
        self.tag, self.log_path, self.output = tag, log_path, output


class LayerNeeds(LayerBuildError):
    """The build ran, but its output says what it lacks (`Layer.needs`): nothing was committed."""

    def __init__(self, tag: str, needed: list[str], log_path: Path | None = None, output: bytes = b""):
        super().__init__(tag, f"it needs {', '.join(needed[:5])}", log_path, output)
        self.needed = needed


@dataclass
class Layer:
    tag: str
    parent: str
    script: str  # bash, run as root in the container (after the tree, if any, is copied in)
    env: dict[str, str] = field(default_factory=dict)  # ENV of the committed image
    network: bool = True  # installing packages needs it; the finished image runs without
    tree: RepoSnapshot | None = None  # copied to `workdir` as a one-commit repository first
    # Set: the only folders the build may change (any other change is refused, scratch is emptied).
    carried: list[str] = field(default_factory=list)
    # Build on this image instead of `parent`, then write the `carried` folders over a container of
    # `parent`, only what differs: the image is what the build made, the layer holds only its
    # difference from `parent` (carry.py).
    build_on: str | None = None
    files: dict[str, bytes] = field(default_factory=dict)  # absolute path -> content, put in first
    workdir: str = "/testbed"
    timeout: float = 3600.0
    # The build's output -> what it says it lacks; non-empty: LayerNeeds, nothing committed.
    needs: Callable[[str], list[str]] | None = None
    # A folder whose files the recipe wrote as notes: each becomes the image's label NOTE_LABEL + name
    # (read back without starting a container). Only for a layer that runs no repository code.
    notes_from: str = ""
    # Written after the script, once every process of the build is gone, just before the commit: what
    # the build's own code (a repository's) must not be able to change.
    final_files: dict[str, bytes] = field(default_factory=dict)
    also_tag: list[str] = field(default_factory=list)  # other tags of the committed image


@dataclass
class BuildResult:
    tag: str
    built: bool  # False: it was already there
    seconds: float
    output: bytes = b""  # the build's output (b"" when it was already there)


def build_layer(layer: Layer, log_path: Path | None = None) -> BuildResult:
    started = time.monotonic()
    if image_exists(layer.tag):
        return BuildResult(layer.tag, False, 0.0)
    with file_lock(cache_dir() / "locks" / (layer.tag.replace("/", "_").replace(":", "_") + ".lock")):
        if image_exists(layer.tag):  # another worker built it while we waited
            return BuildResult(layer.tag, False, time.monotonic() - started)
        output = _build(layer, log_path)
    return BuildResult(layer.tag, True, time.monotonic() - started, output)


def confinement(limits: BuildLimits = BUILD_LIMITS) -> dict:
    """The container options every build container gets (the sandbox's capabilities, no new privileges, limits)."""
    return dict(cap_drop=["ALL"], cap_add=CAPABILITIES, security_opt=["no-new-privileges"], mem_limit=limits.memory,
                memswap_limit=limits.memory, pids_limit=limits.pids, nano_cpus=int(limits.cpus * 1e9))


def _container(image: str, layer: Layer, network: bool):
    return docker_client().containers.create(
        image, ["sleep", "infinity"], init=True, network_mode="bridge" if network else "none",
        environment=layer.env, working_dir="/", labels={BUILD_LABEL: "build", **owner_labels()}, **confinement(),
    )


def _build(layer: Layer, log_path: Path | None) -> bytes:
    container = _container(layer.build_on or layer.parent, layer, layer.network)
    try:
        container.start()
        if layer.files:
            _put_files(container, layer.files)
        if layer.tree is not None:
            _copy_tree(container, layer)
        script = f"set -euo pipefail\n{layer.script}"
        exit_code, output = _exec_with_timeout(container, ["bash", "-c", script], layer.timeout)
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log_path.write_bytes(output)
        if exit_code != 0:
            tail = output.decode("utf-8", errors="replace")[-1500:]
            raise LayerBuildError(layer.tag, f"exit code {exit_code}:\n{tail}", log_path, output)
        needed = layer.needs(output.decode("utf-8", errors="replace")) if layer.needs else []
        if needed:
            raise LayerNeeds(layer.tag, needed, log_path, output)
        if layer.carried:
            _confine(container, layer)
        labels = _notes(container, layer.notes_from) if layer.notes_from else {}
        if layer.final_files:
            container.kill()  # no process of the build is left to change them
            _put_files(container, layer.final_files)
        if layer.build_on is None:
            _commit(container, layer, labels)
        else:
            _commit_carried(container, layer)
        return output
    except Exception as exc:
        if "no space left on device" in str(exc).lower():
            raise LayerBuildError(layer.tag, "the disk is full: free space, or `codeagent sandbox prune --images`",
                                  log_path) from exc
        raise
    finally:
        container.remove(force=True)


def _commit(container, layer: Layer, labels: dict[str, str] | None = None) -> None:
    repository, _, version = layer.tag.rpartition(":")
    changes = [f"ENV {key}={value}" for key, value in layer.env.items()] + [f"WORKDIR {layer.workdir}"]
    image = container.commit(repository=repository, tag=version, changes=changes,
                             **({"conf": {"Labels": labels}} if labels else {}))  # added to the parent's
    for other in layer.also_tag:
        other_repository, _, other_version = other.rpartition(":")
        image.tag(other_repository, other_version)


def _image_labels(image: str) -> dict[str, str]:
    return dict(docker_client().images.get(image).labels or {})


def _notes(container, folder: str) -> dict[str, str]:
    """The files of `folder` in the container as labels (a missing folder: none)."""
    from docker.errors import NotFound

    try:
        chunks, _ = container.get_archive(folder)
    except NotFound:
        return {}
    labels = {}
    with tarfile.open(fileobj=io.BytesIO(b"".join(chunks)), mode="r:") as archive:
        for member in archive.getmembers():
            source = archive.extractfile(member) if member.isfile() else None
            if source is not None:
                text = source.read(MAX_NOTE).decode(errors="replace").strip()
                labels[NOTE_LABEL + Path(member.name).name] = text
    return labels


def image_notes(image: str) -> dict[str, str]:
    """{name: text} of the notes an image's toolchain recipes left (notes_from)."""
    return {key[len(NOTE_LABEL):]: value for key, value in _image_labels(image).items() if key.startswith(NOTE_LABEL)}


def _confine(container, layer: Layer) -> None:
    """Refuse a build that changed anything outside its carried folders; empty its scratch."""
    strays = changes_outside(container, layer.carried)
    if strays:
        raise LayerBuildError(layer.tag, f"the build changed {', '.join(strays[:5])} outside "
                                         f"{', '.join(layer.carried)}, the only folders it may change")
    container.exec_run(["find", "/tmp", "/var/tmp", "-mindepth", "1", "-delete"])


def _commit_carried(builder, layer: Layer) -> None:
    """Write the builder's carried folders over a container of `layer.parent`, and commit that."""
    target = _container(layer.parent, layer, network=False)
    try:
        target.start()
        try:
            carry_over(builder, target, layer.carried, lambda box, argv: _exec_with_timeout(box, argv, layer.timeout))
        except RuntimeError as exc:
            raise LayerBuildError(layer.tag, f"over {layer.parent}: {exc}") from exc
        if layer.tree is not None:
            # the index's stat data are the builder's files': those kept from the parent differ in them
            code, output = _exec_with_timeout(target, ["git", "-C", layer.workdir, "update-index", "-q", "--refresh"],
                                              layer.timeout)
            if code != 0:
                raise LayerBuildError(layer.tag, f"refreshing the index failed: {output.decode(errors='replace')[-500:]}")
        _commit(target, layer)
    finally:
        target.remove(force=True)


def _put_files(container, files: dict[str, bytes]) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    container.put_archive("/", buffer.getvalue())


def _copy_tree(container, layer: Layer) -> None:
    assert layer.tree is not None
    with tempfile.TemporaryDirectory(prefix="codeagent-layer-") as tmp:
        tarball = Path(tmp) / "tree.tar"
        layer.tree.write_tar(tarball, prefix=layer.workdir)  # extracted at /: see write_tar
        code, output = container.exec_run(["mkdir", "-p", layer.workdir])
        with open(tarball, "rb") as data:
            if code != 0 or not container.put_archive("/", data):
                raise LayerBuildError(layer.tag, f"copying the repository into {layer.workdir} failed")
    code, output = container.exec_run(["sh", "-c", INIT_REPO_SCRIPT, "sh", layer.tree.commit], workdir=layer.workdir)
    if code != 0:
        raise LayerBuildError(layer.tag, f"preparing the repository failed: {output.decode(errors='replace')[-800:]}")


def _exec_with_timeout(container, cmd: list[str], timeout: float) -> tuple[int, bytes]:
    """Run cmd in the container, stdout+stderr merged, killing it after `timeout` seconds."""
    wrapped = ["timeout", "--kill-after=10", str(int(timeout)), *cmd]
    api = docker_client().api
    exec_id = api.exec_create(container.id, wrapped, stdout=True, stderr=True)["Id"]
    chunks = [chunk for chunk in api.exec_start(exec_id, stream=True)]
    code = api.exec_inspect(exec_id).get("ExitCode")
    if code == 124:
        chunks.append(f"\n[codeagent: killed after {timeout:g}s]\n".encode())
    return code if code is not None else -1, b"".join(chunks)
