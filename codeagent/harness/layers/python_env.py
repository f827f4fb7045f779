"""A task's images: base (per Debian suite) -> system (Debian packages, a downloaded Python) -> env
(the virtualenv and Python packages) -> instance (the repository at its base commit, installed).
Tags come from the content of each layer: cached.

The layers go from the most shared to the least, so a node holds each shared one once (issue 27):
the system layer depends only on the suite and the package list, which nearly every repository and
version shares; the env layer on the Python packages; the instance layer on the repository. What
only building needs is left out of the layer that makes it: apt's package cache and lists, pip's
cache, Debian's docs and man pages."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...git_args import end_of_options, revision
from ...sandbox.images import build_base_image
from ...sandbox.workspace import BASE_TAG, RepoSnapshot, snapshot
from ...task import Task
from ..specs.swebench import ResolvedSpec, requirements_text
from .carry import carry_recipe
from .layer import Layer, build_layer

ENV_PREFIX = "/opt/env"
REQUIREMENTS_FILE = "/tmp/codeagent-requirements.txt"
CONSTRAINTS_FILE = "/opt/codeagent-constraints.txt"
# setuptools 80 turned `setup.py develop` into a call of `python -m pip` from inside pip's isolated
# build environment, where pip cannot be imported: the editable installs of older repositories
# fail. The constraint also reaches those isolated builds (pip hands PIP_CONSTRAINT down).
BUILD_CONSTRAINTS = "setuptools<80\n"
SYSTEM_IMAGE = "codeagent/system"
ENV_IMAGE = "codeagent/env"
DEPS_IMAGE = "codeagent/deps"
INSTANCE_IMAGE = "codeagent/instance"


@dataclass
class TaskImages:
    base: str
    system: str
    env: str
    instance: str
    built: list[str]  # the layers this call had to build
    seconds: float
    deps: str | None = None  # the version's dependencies, between env and instance (spec deps_layer)


def task_images(task: Task, spec: ResolvedSpec, log_dir: Path | None = None,
                phase: Callable[[str], None] | None = None) -> TaskImages:
    """Build what is missing of the task's layers (system, env, deps, instance); return their tags.
    `phase(text)` is told what is going on (cloning, building the environment), for a progress display."""
    import time

    phase = phase or (lambda text: None)
    started = time.monotonic()
    built = []
    base = base_image(spec.suite)
    phase("cloning the repository")
    source = snapshot(task.repo, task.base_commit)
    phase("building the environment")
    system = base
    for number, layer in enumerate(_system_layers(spec, base), 1):
        if build_layer(layer, log_dir / f"system{number}_build.log" if log_dir else None).built:
            built.append(layer.tag)
        system = layer.tag
    env_layer = _env_layer(spec, system, source)
    if build_layer(env_layer, log_dir / "env_build.log" if log_dir else None).built:
        built.append(env_layer.tag)
    deps_layer = _deps_layer(spec, env_layer, snapshot(task.repo, spec.deps_commit)) if spec.deps_commit else None
    if deps_layer is not None and build_layer(deps_layer, log_dir / "deps_build.log" if log_dir else None).built:
        built.append(deps_layer.tag)
    instance_layer = _instance_layer(spec, env_layer, source, deps_layer)
    if build_layer(instance_layer, log_dir / "instance_build.log" if log_dir else None).built:
        built.append(instance_layer.tag)
    return TaskImages(base, system, env_layer.tag, instance_layer.tag, built, time.monotonic() - started,
                      deps_layer.tag if deps_layer else None)


def base_image(suite: str | None) -> str:
    """The base image of a Debian suite, built by one worker at a time (the others wait for it)."""
    from ...locks import file_lock
    from ...sandbox.workspace import cache_dir

    with file_lock(cache_dir() / "locks" / f"base-{suite or 'default'}.lock"):
        return build_base_image(suite=suite, log=lambda line: None)


def image_env(spec: ResolvedSpec) -> dict[str, str]:
    return {**spec.env, "VIRTUAL_ENV": ENV_PREFIX, "PIP_CONSTRAINT": CONSTRAINTS_FILE,
            "PATH": f"{ENV_PREFIX}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}


def layer_tag(image: str, parent: str, script: str, env: dict[str, str], files: dict[str, bytes],
              tree: RepoSnapshot | None) -> str:
    """A tag from everything that makes the layer: a changed recipe can never reuse a stale image."""
    digest = hashlib.sha256(json.dumps([parent, script, sorted(env.items()), tree.commit if tree else None],
                                       sort_keys=True).encode())
    for path, data in sorted(files.items()):
        digest.update(path.encode() + b"\0" + hashlib.sha256(data).digest())
    return f"{image}:{digest.hexdigest()[:24]}"


# Debian's docs, man and info pages: no test reads them. Left in the layers they would fill, with
# apt's downloaded packages and lists, a third of the system layer.
APT_CLEAN = ("apt-get clean; rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin "
             "/usr/share/doc/* /usr/share/man/* /usr/share/info/*")
# pip's cache: what pip downloaded and built, kept for a next install there will not be
PIP_CACHE_CLEAN = "rm -rf /root/.cache/pip"
# The pip the instance layer installs the repository with (see _instance_layer); the env layer
# installs it last, so instance layers share it instead of each holding a copy.
PIP_FOR_INSTALL = "python -m pip install -q 'pip>=21.3,<25.3'"


def _system_layers(spec: ResolvedSpec, base: str) -> list[Layer]:
    """What the environment needs from Debian, most shared first: the packages every repository asks
    for (_common.yaml's) with the Python's own; those of _common.yaml's shared_system_packages it asks
    for (the locales: a layer some repositories share); a Python no suite has (fetched by uv); the
    packages the repository adds. Keyed by their content only: environments on the same suite share them."""
    from ..specs.swebench import load_library

    library = load_library()
    wanted = set(spec.system_packages) | set(spec.python_debian_packages)
    common = wanted & (set(library.common.system_packages or []) | set(spec.python_debian_packages))
    shared = (wanted - common) & set(library.shared_system_packages)
    steps = [_dpkg_exclude(library.system_exclude) + _apt_install(sorted(common))] if common else []
    if shared:
        steps.append(_apt_install(sorted(shared)))
    if spec.python_download:  # a Python no suite has: fetched by uv (specs.downloads_allowed)
        mirror = os.environ.get("UV_PYTHON_INSTALL_MIRROR", "")
        fetch = f"UV_PYTHON_INSTALL_MIRROR={shlex.quote(mirror)} " if mirror else ""
        steps.append(f"python3 -m venv /opt/uv && /opt/uv/bin/pip install -q --no-cache-dir uv\n"
                     f"{fetch}/opt/uv/bin/uv python install {shlex.quote(spec.python_used)}\nrm -rf /root/.cache/uv")
    if wanted - common - shared:
        steps.append(_apt_install(sorted(wanted - common - shared)))
    layers: list[Layer] = []
    for script in steps:
        parent = layers[-1].tag if layers else base
        layers.append(Layer(tag=layer_tag(SYSTEM_IMAGE, parent, script, {}, {}, None), parent=parent, script=script))
    return layers


def _dpkg_exclude(patterns: list[str]) -> str:
    """Shell that has dpkg leave files matching `patterns` out of every package installed from here on."""
    if not patterns:
        return ""
    lines = "".join(f"path-exclude {pattern}\n" for pattern in patterns)
    return f"printf %s {shlex.quote(lines)} > /etc/dpkg/dpkg.cfg.d/codeagent-environment; "


def _apt_install(packages: list[str]) -> str:
    return ("export DEBIAN_FRONTEND=noninteractive; apt-get update -qq; "
            f"apt-get install -y -qq --no-install-recommends {' '.join(map(shlex.quote, packages))}; " + APT_CLEAN)


def _env_layer(spec: ResolvedSpec, parent: str, source: RepoSnapshot) -> Layer:
    """The virtualenv and the spec's Python packages, on `parent` (the system layer)."""
    if spec.python_download:
        steps = [f"/opt/uv/bin/uv venv --seed --python {shlex.quote(spec.python_used)} {ENV_PREFIX}"]
    else:
        steps = [f"python3 -m venv {ENV_PREFIX}"]  # the suite's python3, with its own pip (not upgraded)
    files = {CONSTRAINTS_FILE: BUILD_CONSTRAINTS.encode()}
    requirements = requirements_text(spec, _reader(source, spec.requirements_commit)) if spec.requirements else None
    if requirements:
        files[REQUIREMENTS_FILE] = requirements[1].encode()
        steps.append(f"pip install -r {REQUIREMENTS_FILE}")
    if spec.pip_packages:
        steps.append(f"pip install {' '.join(map(shlex.quote, spec.pip_packages))}")
    steps += [PIP_FOR_INSTALL, PIP_CACHE_CLEAN]
    script, env = "\n".join(steps), image_env(spec)
    return Layer(tag=layer_tag(ENV_IMAGE, parent, script, env, files, None), parent=parent, script=script,
                 env=env, files=files)


def _deps_layer(spec: ResolvedSpec, env_layer: Layer, deps: RepoSnapshot) -> Layer:
    """deps_layer: on the env layer, what the version's instances share: the dependencies the install
    brings at spec.deps_commit, nothing else (the project uninstalled, its tree removed, any change
    outside the venv refused). It is what an instance layer is written over, never what it is built on
    (_instance_layer). No file of the repository stays: its times would tell an instance which of its
    files the (later) setup commit changed."""
    steps = ["cd /testbed", *_pretend_version(deps), *spec.pre_install, *spec.install, UNINSTALL_PROJECT,
             "cd /", "rm -rf /testbed", PIP_CACHE_CLEAN]
    script = "\n".join(steps)
    return Layer(tag=layer_tag(DEPS_IMAGE, env_layer.tag, script, env_layer.env, {}, deps), parent=env_layer.tag,
                 script=script, env=env_layer.env, tree=deps, carried=[ENV_PREFIX])


# Uninstalls what was installed from /testbed (an editable install, a `setup.py develop`, a plain
# `pip install .`): the dependencies stay. Run in the deps layer.
UNINSTALL_PROJECT = """python - <<'EOF'
import importlib.metadata, subprocess, sys
names = {dist.metadata["Name"] for dist in importlib.metadata.distributions()
         if str(getattr(dist, "_path", "")).startswith("/testbed/") or "file:///testbed" in (dist.read_text("direct_url.json") or "")}
names.discard(None)
if names:
    subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", *sorted(names)], check=True)
EOF"""


def _pretend_version(source: RepoSnapshot) -> list[str]:
    """The copy in /testbed has no tags: setuptools_scm would call the project 0.1.dev1, and a
    `minversion` check (pytest's own tox.ini) then refuses to run. Tell it the release instead."""
    version = release_version(source)
    return [f"export SETUPTOOLS_SCM_PRETEND_VERSION={shlex.quote(version)}"] if version else []


ENVIRONMENT_COMMIT = (f"git diff --quiet || {{ git -c user.name=codeagent -c user.email=codeagent@localhost "
                      f"commit -q --no-verify -am 'codeagent environment' && git tag -f {BASE_TAG} >/dev/null; }}")


def _instance_layer(spec: ResolvedSpec, env_layer: Layer, source: RepoSnapshot, deps_layer: Layer | None = None) -> Layer:
    """The repository at the task's commit in /testbed, installed. Always built on the env layer, as if
    no deps layer existed (what pip resolves is the instance's own: a dependency the setup commit
    pinned differently, or one only it needs, never leaks in); with a deps layer, the result is then
    written over it (Layer.build_on), so the layer holds only what differs from the version's."""
    # Editable installs of pyproject-only projects need pip >= 21.3 (PEP 660); older releases of
    # bullseye's pip refuse them. Below 25.3, which dropped options old specs use (--no-use-pep517).
    steps = ["cd /testbed", *_pretend_version(source), PIP_FOR_INSTALL, *spec.pre_install, *spec.install,
             # whatever the install made (egg-info, compiled extensions) never shows in a diff
             "git ls-files --others --exclude-standard >> .git/info/exclude",
             # the environment's own edits of tracked files (a pre_install `sed` on tox.ini, setup.py) are
             # part of the base, as the official images commit them: the agent's diff never carries them
             # (a patch that did would fail to apply on the environment as built, issue 28)
             ENVIRONMENT_COMMIT, PIP_CACHE_CLEAN]
    script = "\n".join(steps)
    if deps_layer is None:
        return Layer(tag=layer_tag(INSTANCE_IMAGE, env_layer.tag, script, env_layer.env, {}, source),
                     parent=env_layer.tag, script=script, env=env_layer.env, tree=source)
    carried = [ENV_PREFIX, "/testbed"]
    return Layer(tag=layer_tag(INSTANCE_IMAGE, deps_layer.tag, script + carry_recipe(carried), env_layer.env, {},
                               source),
                 parent=deps_layer.tag, script=script, env=env_layer.env, tree=source, build_on=env_layer.tag,
                 carried=carried)


def _reader(source: RepoSnapshot, commit: str | None):
    """read(path) -> the file's text at `commit` (default: the task's base), or None."""
    revision(commit or source.commit, "commit")  # a dataset's environment_setup_commit: never an option

    def read(path: str) -> str | None:
        proc = subprocess.run(["git", "--git-dir", str(source.git_dir), "show", *end_of_options(),
                               f"{commit or source.commit}:{path}"], capture_output=True)
        return proc.stdout.decode("utf-8", errors="replace") if proc.returncode == 0 else None

    return read


def release_version(source: RepoSnapshot) -> str | None:
    """The nearest release tag before the task's commit, as a version (None if there is none)."""
    from packaging.version import InvalidVersion, Version

    proc = subprocess.run(["git", "--git-dir", str(source.git_dir), "describe", "--tags", "--abbrev=0", *end_of_options(), source.commit],
                          capture_output=True, text=True)
    tag = proc.stdout.strip().removeprefix("v") if proc.returncode == 0 else ""
    try:
        return str(Version(tag)) if tag else None
    except InvalidVersion:
        return None
