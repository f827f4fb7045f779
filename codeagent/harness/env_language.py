"""The images of a language task (a Go, Rust, JavaScript, Java or C/C++ repository; its spec: lang_specs.py):

    base -> toolchain (languages/*.yaml's recipe, at the spec's toolchain_version where the recipe can
    install one, else the one the repository states, else Debian's: the layer a user's repository gets)
         -> system packages (when the spec lists some)
         -> dependencies (only when the spec sets no `install`: the toolchain's own fetch, keyed by the
            manifests, so neighbouring commits share it)
         -> instance (the repository at its base commit in /testbed, then pre_install and install)

Every layer is built with the network and committed only when its step succeeds (harness/layers.py);
its tag is the hash of what defines it, so nothing is built twice. Containers of the finished image
(the agent's sandbox, the grading run) have no network.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..code.languages import toolchains
from ..git_args import end_of_options
from ..sandbox.workspace import RepoSnapshot, snapshot
from ..task import Task
from .env_toolchain import APT, LEAN, Detected, dependencies_layer, detect, toolchain_layer
from .environment import ENVIRONMENT_COMMIT, base_image, layer_tag
from .lang_specs import LanguageSpec
from .layers import Layer, LayerBuildError, build_layer

PACKAGES_IMAGE = "codeagent/lang-packages"
INSTANCE_IMAGE = "codeagent/lang-instance"


@dataclass
class LanguageTaskImages:
    base: str
    toolchain: str
    env: str  # the layer the instance stands on (the toolchain, its system packages or dependencies)
    instance: str
    found: Detected  # the toolchain, its variant and version
    layers: dict[str, str]  # step -> tag, bottom first
    built: list[str]  # the layers this call had to build
    seconds: float


def _top_names(snap: RepoSnapshot) -> set[str]:
    listing = subprocess.run(["git", f"--git-dir={snap.git_dir}", "ls-tree", "-z", "--name-only", *end_of_options(),
                              snap.commit], capture_output=True, text=True, errors="surrogateescape")
    return set(listing.stdout.split("\0")) - {""} if listing.returncode == 0 else set()


def installs_versions(language: str) -> bool:
    """Can the toolchain install a stated version (its recipe has a `version_install`)? Else Debian's is used."""
    return any(tool.name == language and tool.version_install for tool in toolchains())


def toolchain_of(spec: LanguageSpec, snap: RepoSnapshot) -> Detected:
    """The spec's toolchain, its variant chosen by the repository's files (a lockfile), its version:
    the spec's toolchain_version where the recipe can install one, else the one the repository states
    ('' none: Debian's)."""
    tool = next(tool for tool in toolchains() if tool.name == spec.language)  # lang_specs checked the name
    found = detect(snap)
    if found is not None and found.toolchain.name == tool.name:
        variant, version, version_file = found.variant, found.version, found.version_file
    else:
        top = _top_names(snap)
        variant, version, version_file = next((v for v in tool.variants if v.when in top), None), "", ""
    if spec.toolchain_version and tool.version_install:
        version, version_file = spec.toolchain_version, ""
    return Detected(tool, spec.layers[-1] if spec.layers else "spec", variant, version, version_file)


def packages_layer(spec: LanguageSpec, parent: str) -> Layer:
    script = "\n".join([APT.format(packages=" ".join(map(shlex.quote, sorted(set(spec.system_packages))))), LEAN])
    return Layer(tag=layer_tag(PACKAGES_IMAGE, parent, script, {}, {}, None), parent=parent, script=script)


# npm rewrites the lockfiles it installs from: put back, as the official harness does, else a patch
# that touches one would not apply on the base as built
RESTORE_LOCKFILES = ("for lockfile in package-lock.json npm-shrinkwrap.json yarn.lock; do "
                     "if git ls-files --error-unmatch -- \"$lockfile\" >/dev/null 2>&1; then "
                     "git checkout -q -- \"$lockfile\"; fi; done")


# What the install made (node_modules/, target/, build/) never shows in a diff: each untracked path,
# a folder once, anchored at the top and its glob characters escaped, so that the same name elsewhere
# (a new file the agent writes) still shows.
EXCLUDE_INSTALLED = ("git -c core.quotePath=false ls-files --others --exclude-standard --directory | "
                     r"sed -e 's/[][*?!#\\]/\\&/g' -e 's|^|/|' >> .git/info/exclude")


def instance_layer(spec: LanguageSpec, parent: str, source: RepoSnapshot) -> Layer:
    steps = ["cd /testbed", *spec.pre_install, *(spec.install or []), RESTORE_LOCKFILES, EXCLUDE_INSTALLED,
             ENVIRONMENT_COMMIT]  # the install's edits of tracked files are part of the base (environment.py)
    script = "\n".join(steps)
    return Layer(tag=layer_tag(INSTANCE_IMAGE, parent, script, spec.env, {}, source), parent=parent,
                 script=script, env=dict(spec.env), tree=source)


def failed_step(step: str, error: LayerBuildError) -> LayerBuildError:
    """The error of a layer that failed, its first line naming the step and its output's last line (what
    a one-line report shows); the output's last lines and the build log follow."""
    detail = str(error).split(" failed: ", 1)[-1]
    lines = detail.splitlines()
    said = [line.strip() for line in lines[1:] or lines if line.strip() and not line.strip().startswith("(build log:")]
    return LayerBuildError(error.tag, f"the {step} step: {said[-1][:300] if said else 'no output'}\n{detail}")


def language_images(task: Task, spec: LanguageSpec, log_dir: Path | None = None,
                    phase: Callable[[str], None] | None = None) -> LanguageTaskImages:
    """Build what is missing of the task's layers (the module docstring); their tags. `phase(text)`
    is told what is going on."""
    phase = phase or (lambda text: None)
    started = time.monotonic()
    base = base_image(None)
    phase("cloning the repository")
    source = snapshot(task.repo, task.base_commit)
    found = toolchain_of(spec, source)
    phase(f"building the {found.label} environment")
    built: list[str] = []
    layers: dict[str, str] = {}

    def build(step: str, layer: Layer) -> str:
        try:
            result = build_layer(layer, log_dir / f"{step}_build.log" if log_dir else None)
        except LayerBuildError as error:
            raise failed_step(step, error) from error
        if result.built:
            built.append(layer.tag)
        layers[step] = layer.tag
        return layer.tag

    top = toolchain = build("toolchain", toolchain_layer(found, base))
    if spec.system_packages:
        top = build("packages", packages_layer(spec, top))
    if spec.install is None and (deps := dependencies_layer(found, top, source)) is not None:
        top = build("dependencies", deps)
    instance = build("instance", instance_layer(spec, top, source))
    return LanguageTaskImages(base, toolchain, top, instance, found, layers, built, time.monotonic() - started)
