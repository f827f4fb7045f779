"""Tasks that run in prebuilt images pulled from a registry, not in images codeagent builds.

Three layouts (facts from the projects' own harnesses, not their code):

- `swebench`: the official SWE-bench evaluation images (`--images official`), and SWE-Gym's. The
  repository is at /testbed on the task's base commit, with a conda env `testbed` that the official
  eval script activates (`source /opt/miniconda3/bin/activate; conda activate testbed`). Name:
  `<namespace>/sweb.eval.<arch>.<instance id, lower case>:<tag>` with every `__` written `_1776_`
  (swebench.harness.test_spec: instance_image_key; namespace `swebench` on Docker Hub by default).
- `swe-smith`: the repository's clean tree at /testbed with a conda env `testbed`; the task's bug
  is its `patch` applied on top (SWE-smith checks out a branch holding it; offline, the patch is the
  same change).
- `r2e-gym`: /testbed with its own .venv; the hidden tests in /r2e_tests and `run_tests.sh` at the
  repository root. R2E-Gym moves both out of the repository before the agent starts; here the
  agent's image has neither, the grading image keeps them under /root.

A pulled image gets one thin layer of codeagent's own (layers/layer.py): the tree at /testbed becomes
the commit tagged codeagent-base (so `diff()` is the agent's change and test files can be reset),
the env's bin directory goes first on PATH. Its tag is derived from the pulled image's id: a new
image behind the same name prepares a new layer.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from ...sandbox.errors import SandboxError
from ...sandbox.workspace import BASE_TAG, IGNORED_DEBRIS, INIT_REPO_SCRIPT, RepoSnapshot
from ...task import Task

SOURCES = ("build", "official")
OFFICIAL_NAMESPACE = "swebench"
OFFICIAL_ARCH = "x86_64"
OFFICIAL_TAG = "latest"
PREPARED_IMAGE = "codeagent/prebuilt"
CONDA_ACTIVATE = "source /opt/miniconda3/bin/activate && conda activate testbed"
CONDA_BIN = "/opt/miniconda3/envs/testbed/bin:/opt/miniconda3/condabin:/opt/miniconda3/bin"
R2E_HIDDEN = "/root"  # where run_tests.sh and r2e_tests go in the grading image (as R2E-Gym does)
BUG_PATCH = "/tmp/codeagent-bug.patch"
LAYOUTS = {"swebench", "swe-gym", "swe-smith", "r2e-gym"}


class PrebuiltImageError(SandboxError):
    """A prebuilt image that cannot be had (not in the registry, registry unreachable) or prepared."""


def official_image(instance_id: str, namespace: str = OFFICIAL_NAMESPACE, arch: str = OFFICIAL_ARCH,
                   tag: str = OFFICIAL_TAG) -> str:
    """The official harness's remote name of an instance's evaluation image."""
    key = f"sweb.eval.{arch}.{instance_id.lower()}:{tag}"
    return f"{namespace}/{key}".replace("__", "_1776_") if namespace else key


def with_registry(name: str, registry: str | None) -> str:
    """`name` pulled through `registry` (a mirror, host[:port][/path]) instead of its own registry."""
    if not registry:
        return name
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):  # the name carries a registry host
        name = rest
    return f"{registry.rstrip('/')}/{name}"


def mark(tasks: list[Task], source: str = "build", namespace: str | None = None,
         registry: str | None = None) -> list[Task]:
    """The tasks with the image choice recorded on them (task.images), so it travels with
    the task to any worker. Tasks whose format names their image (SWE-Gym, SWE-smith, R2E-Gym) run
    in it whatever `source` says; with `official`, SWE-bench tasks run in the official images."""
    if source not in SOURCES:
        raise ValueError(f"unknown image source {source!r}; use one of {', '.join(SOURCES)}")
    marked = []
    for task in tasks:
        if source == "official" or task.docker_image:
            choice = {"source": "official" if source == "official" and not task.docker_image
                      else "prebuilt", "namespace": namespace or OFFICIAL_NAMESPACE, "registry": registry or ""}
            task = task.model_copy(update={"images": choice})
        marked.append(task)
    return marked


def layout(task: Task) -> str:
    kind = task.task_format or "swebench"
    return "swebench" if kind == "swe-gym" or kind not in LAYOUTS else kind


def remote_image(task: Task) -> str:
    """The name to pull, through the configured mirror when there is one."""
    choice = task.images or {}
    name = task.docker_image or official_image(task.instance_id, choice.get("namespace") or OFFICIAL_NAMESPACE)
    return with_registry(name, choice.get("registry"))


def pull(name: str) -> str:
    """The id of image `name`: the local one if there is one, else pulled. One-line errors."""
    from docker.errors import APIError, ImageNotFound

    from ...sandbox.engine import docker_client

    client = docker_client()
    try:
        return client.images.get(name).id
    except ImageNotFound:
        pass
    repository, tag = _split_tag(name)
    try:
        return client.images.pull(repository, tag=tag).id
    except (ImageNotFound, APIError) as error:
        why = (getattr(error, "explanation", None) or str(error)).strip().splitlines()
        raise PrebuiltImageError(f"cannot pull {name}: {why[0][:300] if why else type(error).__name__}") from None
    except Exception as error:  # the engine's HTTP client: connection refused, timeouts
        raise PrebuiltImageError(f"cannot pull {name}: {type(error).__name__}: "
                                 f"{str(error).splitlines()[0][:300] if str(error) else ''}") from None


def _split_tag(name: str) -> tuple[str, str]:
    if "@" in name:
        return name, ""
    head, _, last = name.rpartition("/")
    if ":" in last:
        last, _, tag = last.partition(":")
        return f"{head}/{last}" if head else last, tag
    return name, OFFICIAL_TAG


@dataclass
class PrebuiltImages:
    remote: str  # what was pulled
    eval: str  # the prepared image graded in (hidden tests kept)
    agent: str  # the prepared image the agent works in (hidden tests gone)
    built: list[str]


def prepare(task: Task, log_dir: Path | None = None) -> PrebuiltImages:
    """Pull the task's image (if missing here) and add codeagent's layer; the images' tags."""
    from ...sandbox.engine import docker_client
    from ..layers.layer import Layer, LayerBuildError, build_layer

    remote = remote_image(task)
    image_id = pull(remote)
    base_env = docker_client().images.get(image_id).attrs.get("Config", {}).get("Env") or []
    kind = layout(task)
    env = _layer_env(kind, dict(item.split("=", 1) for item in base_env if "=" in item))
    files = {BUG_PATCH: _bug_patch(task).encode()} if kind == "swe-smith" else {}
    script = prepare_script(kind)
    built = []
    layer = Layer(tag=_tag(image_id, script, env, files), parent=image_id, script=script, env=env, files=files,
                  network=False, timeout=1800)
    try:
        if build_layer(layer, log_dir / "prebuilt_prepare.log" if log_dir else None).built:
            built.append(layer.tag)
        agent = layer.tag
        hide = hide_script(task)
        if hide:  # the agent never sees the tests that grade it
            agent_layer = Layer(tag=_tag(layer.tag, hide, env, {}), parent=layer.tag, script=hide, env=env,
                                network=False)
            if build_layer(agent_layer).built:
                built.append(agent_layer.tag)
            agent = agent_layer.tag
    except LayerBuildError as error:
        raise PrebuiltImageError(f"preparing {remote} failed: {str(error).splitlines()[0][:300]}") from None
    return PrebuiltImages(remote, layer.tag, agent, built)


def _bug_patch(task: Task) -> str:
    if task.bug_patch is None:
        raise PrebuiltImageError(f"task {task.instance_id}: a SWE-smith task without its bug_patch")
    return task.bug_patch


def _tag(parent: str, script: str, env: dict[str, str], files: dict[str, bytes]) -> str:
    digest = hashlib.sha256(json.dumps([parent, script, sorted(env.items())]).encode())
    for path, data in sorted(files.items()):
        digest.update(path.encode() + b"\0" + hashlib.sha256(data).digest())
    return f"{PREPARED_IMAGE}:{digest.hexdigest()[:24]}"


def _layer_env(kind: str, image_env: dict[str, str]) -> dict[str, str]:
    path = image_env.get("PATH", "")
    if not re.fullmatch(r"[\w./:+-]+", path):  # the image's word: only a plain PATH goes into the layer's ENV
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    if kind == "r2e-gym":
        return {"PATH": f"/testbed/.venv/bin:{path}", "VIRTUAL_ENV": "/testbed/.venv"}
    return {"PATH": f"{CONDA_BIN}:{path}", "CONDA_DEFAULT_ENV": "testbed"}


def prepare_script(kind: str) -> str:
    """Bash run once in the pulled image: the tree at /testbed becomes a fresh one-commit repository
    tagged codeagent-base, as in the images codeagent builds (no later history can leak into the
    task; an image's clone keeps its future commits and tags reachable)."""
    steps = ["cd /testbed", "git config --global --add safe.directory /testbed"]
    if kind == "swe-smith":
        steps.append(f"git apply --verbose {BUG_PATCH} && rm -f {BUG_PATCH}")
    if kind == "r2e-gym":
        steps += [f"if [ -e run_tests.sh ]; then mv run_tests.sh {R2E_HIDDEN}/run_tests.sh; fi",
                  f"if [ -d /r2e_tests ]; then rm -rf {R2E_HIDDEN}/r2e_tests; mv /r2e_tests {R2E_HIDDEN}/r2e_tests; fi"]
    return "\n".join([*steps, *_fresh_repo_steps(kind)])


def _fresh_repo_steps(kind: str) -> list[str]:
    """In /testbed: the tree becomes a new repository whose one commit is tagged codeagent-base."""
    excluded = [*IGNORED_DEBRIS, *((".venv/", "/r2e_tests") if kind == "r2e-gym" else ())]
    return ["rm -rf .git && git init -q",
            f"printf '%s\\n' {' '.join(shlex.quote(p) for p in excluded)} >> .git/info/exclude",
            f"sh -c {shlex.quote(INIT_REPO_SCRIPT)} sh prebuilt"]


def hide_script(task: Task) -> str | None:
    """What the agent's image leaves out: R2E-Gym's hidden tests; the test files that grade a
    SWE-smith task. Those are deleted from the tree (with their compiled copies) and the repository
    is made anew, one commit of what is left tagged codeagent-base: no commit, tree or blob of a
    hidden test stays in it for `git log --all -p`, `git fsck` or `git cat-file` to print (the
    grading image keeps them)."""
    kind = layout(task)
    if kind == "r2e-gym":
        return f"rm -rf {R2E_HIDDEN}/r2e_tests {R2E_HIDDEN}/run_tests.sh"
    files = sorted({name.split("::", 1)[0] for name in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS] if "::" in name})
    if kind != "swe-smith" or not files:
        return None
    removed = []
    for name in files:
        folder, _, base = name.rpartition("/")
        stem = base[:-3] if base.endswith(".py") else base
        removed += [shlex.quote(name), f"{shlex.quote((folder + '/' if folder else '') + '__pycache__/' + stem)}.*.pyc"]
    return "\n".join(["cd /testbed", f"rm -f -- {' '.join(removed)}", "rm -rf .pytest_cache", *_fresh_repo_steps(kind)])


MAX_TREE_BYTES = 2 * 2**30  # the base tree a prepared image exports for code navigation


@dataclass(frozen=True)
class ImageTree(RepoSnapshot):
    """The base tree of a prepared image: it is in the image, not on this machine. `write_tar`
    exports it (`git archive` of codeagent-base, in a container with no network); what comes out is
    the image's word, which host_tree extracts as it does any repository's (files and folders only)."""

    def write_tar(self, destination: Path) -> None:  # type: ignore[override]  # no `prefix`: exported from its image as is
        from ...sandbox.docker import LABEL, owner_labels
        from ...sandbox.engine import docker_client
        from ...sandbox.errors import WorkspaceError

        client = docker_client()
        container = client.containers.create(self.source, ["sleep", "infinity"], network_mode="none", init=True,
                                             labels={LABEL: "build", **owner_labels()})
        try:
            container.start()
            api = client.api
            run = api.exec_create(container.id, ["git", "-C", "/testbed", "archive", "--format=tar", BASE_TAG],
                                  stdout=True, stderr=False)["Id"]
            written = 0
            with open(destination, "wb") as out:
                for chunk in api.exec_start(run, stream=True):
                    written += len(chunk)
                    if written > MAX_TREE_BYTES:
                        raise WorkspaceError(f"the tree of {self.source} is over {MAX_TREE_BYTES:,} bytes")
                    out.write(chunk)
            if api.exec_inspect(run).get("ExitCode") != 0:
                raise WorkspaceError(f"git archive of {BASE_TAG} in {self.source} failed")
        finally:
            container.remove(force=True)


def image_snapshot(image: str) -> RepoSnapshot:
    """What a sandbox of a prepared image stands on: the tree is in the image (ImageTree)."""
    digest = hashlib.sha256(image.encode()).hexdigest()[:40]
    return ImageTree(git_dir=Path("/nonexistent/codeagent-prebuilt"), commit=BASE_TAG, tree=f"prebuilt-{digest}",
                     source=image)
