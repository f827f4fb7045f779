"""The images of a language task (a Go, Rust, JavaScript, Java or C/C++ repository; its spec: specs/languages.py):

    base -> toolchain (languages/*.yaml's recipe, at the spec's toolchain_version where the recipe can
    install one, else the one the repository states, else the recipe's default or Debian's: the layer a
    user's repository gets, deps.py)
         -> system packages (when the spec lists some)
         -> dependencies (only when the spec sets no `install`: the toolchain's declarative fetch, install
            scripts off, keyed by the dependency files, so neighbouring commits share it)
         -> instance (the repository at its base commit in /testbed, then pre_install, then the spec's
            `install` with network, or else the toolchain's `build` WITHOUT network: installed from the
            caches and compiled once, so a graded run compiles only what the patch changed and never
            installs again)

A layer is committed only when its step succeeds (harness/layers/layer.py), except a `build` that fails, which
is kept as it is (the graded run shows what does not compile) and noted, so that it is built again once the
code that makes layers changed (kept.py); its tag is the hash of what defines it, so nothing is built twice.
Containers of the finished image (the agent's sandbox, the grading run) have no network. A mined repository
is never trusted here: its code never runs with network.
"""

from __future__ import annotations

import dataclasses
import logging
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...sandbox.workspace import ENVIRONMENT_NOTE, RepoSnapshot, snapshot
from ...task import Task
from ..layers.layer import BuildResult, Layer, LayerBuildError, LayerNeeds, build_layer, image_notes
from ..layers.python_env import ENVIRONMENT_COMMIT, base_image, layer_tag
from ..specs.languages import LanguageSpec
from ..specs.toolchains import toolchains
from .deps import APT, LEAN, build_failed, build_script, fetch_step, missing_in, toolchain_layer, with_missing
from .detect import Detected, RepoFiles, detect_all, stated, variant_of
from .kept import build_warning, forget, note, renew_failed_build
from .test_command import human_test_command

PACKAGES_IMAGE = "codeagent/lang-packages"
INSTANCE_IMAGE = "codeagent/lang-instance"

log = logging.getLogger(__name__)


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


def installs_versions(language: str) -> bool:
    """Can the toolchain install a stated version (its recipe has a `version_install`)? Else Debian's is used."""
    return any(tool.name == language and tool.version_install for tool in toolchains())


def toolchain_of(spec: LanguageSpec, snap: RepoSnapshot) -> Detected:
    """The spec's toolchain, its variant chosen by the repository's files (a lockfile), its version:
    the spec's toolchain_version where the recipe can install one, else the one the repository states
    ('' none: the recipe's default, or Debian's)."""
    tool = next(tool for tool in toolchains() if tool.name == spec.language)  # lang_specs checked the name
    found = next((item for item in detect_all(snap).installed if item.toolchain.name == tool.name), None)
    if found is None:
        files = RepoFiles(snap)
        variant = variant_of(tool, files)
        version, version_file = stated(tool.versions, files)
        pm_version, pm_file = stated(variant.versions, files) if variant else ("", "")
        found = Detected(tool, "spec", variant, version, version_file,
                         pm_version or (variant.default_version if variant else ""), pm_file)
    else:
        found = dataclasses.replace(found)
    found.because = spec.layers[-1] if spec.layers else "spec"
    if spec.toolchain_version and tool.version_install:
        found.version, found.version_file = spec.toolchain_version, ""
    elif not tool.version_install:
        found.version, found.version_file = "", ""  # not installed: Debian's is used, and said (toolchain_fallback)
    return found


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


def instance_layer(spec: LanguageSpec, parent: str, source: RepoSnapshot, found: Detected | None = None,
                   note: str = "") -> Layer:
    """The repository in /testbed, then pre_install and the spec's install (with network), or else the
    toolchain's build of `found` (without)."""
    build = build_script(found) if found is not None and spec.install is None else ""
    steps = ["cd /testbed", *spec.pre_install, *(spec.install or []), *([build, "cd /testbed"] if build else []),
             RESTORE_LOCKFILES, EXCLUDE_INSTALLED,
             ENVIRONMENT_COMMIT]  # the install's edits of tracked files are part of the base (layers/python_env.py)
    script = "\n".join(steps)
    return Layer(tag=layer_tag(INSTANCE_IMAGE, parent, script, spec.env, {}, source), parent=parent,
                 script=script, env=dict(spec.env), tree=source, network=spec.install is not None,
                 needs=missing_in(found.toolchain) if build and found else None,
                 final_files={ENVIRONMENT_NOTE: note.encode()} if note else {})


def environment_note(found: Detected, image: str, fetched: str) -> str:
    """What the agent's prompt says of the image: its toolchain, its dependencies, the test command."""
    try:
        notes = image_notes(image)
    except Exception:  # noqa: BLE001 - an image not built (a dry run): no notes
        notes = {}
    names = [found.toolchain.name, *([found.variant.name] if found.variant else [])]
    installed = "; ".join(", ".join(notes[n].split("\n")) for n in map(_slug, names) if n in notes) or found.label
    return "\n".join([f"- toolchains: {installed}", *([f"- dependencies: {fetched}"] if fetched else []),
                      f"- the repository's test command: {human_test_command(found)}"])


def _slug(name: str) -> str:
    from .deps import slug

    return slug(name)


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

    def build(step: str, layer: Layer) -> BuildResult:
        try:
            result = build_layer(layer, log_dir / f"{step}_build.log" if log_dir else None)
        except LayerNeeds:
            raise  # what the build lacks: fetched, then built again (with_missing)
        except LayerBuildError as error:
            raise failed_step(step, error) from error
        if result.built:
            built.append(layer.tag)
        layers[step] = layer.tag
        return result

    top = toolchain = build("toolchain", toolchain_layer(found, base)).tag
    if spec.system_packages:
        top = build("packages", packages_layer(spec, top)).tag
    fetched, said = None, ""
    if spec.install is None:
        step = fetch_step(found, top, source, RepoFiles(source), trusted=False)
        if step.layer is not None:
            top = fetched = build("dependencies", step.layer).tag
            said = step.what
    layer = instance_layer(spec, top, source, found, environment_note(found, toolchain, said))
    if refused := renew_failed_build(layer.tag):  # kept under other code: built again, or said why not
        log.warning("%s", refused)
    built_layer, output = with_missing(found, fetched, layer, lambda each: build("instance", each).output)
    if status := build_failed(output):
        note(build_warning(layer.tag), f"the {found.name} build of {task.instance_id} exited {status}; "
                                       f"what it built is kept (its image {built_layer.tag})")
    elif output:  # built anew and it succeeded: an older failure's note would untag it under the next code
        forget(build_warning(layer.tag))
    return LanguageTaskImages(base, toolchain, top, built_layer.tag, found, layers, built, time.monotonic() - started)
