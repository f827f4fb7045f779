"""A user's repository's environment: its language toolchain, on the base image; and its graded test
command (`test_report`).

Resolved in order (a task's own environment spec is the harness's, before this): the repository's
devcontainer, only when the user trusts the repository (harness/devcontainer.py; an untrusted,
malformed or failing one is said in the line, and the next choice is used); `sandbox.image` from the
user's config; else the toolchain detected from the repository's files (the `toolchain:` sections of
languages/*.yaml, lowest `order` first); else Python on the base image, as before. A toolchain is
two layers built with harness/layers.py: the language (Debian packages and install steps, keyed by
the recipe and the base image), then its dependencies fetched into the language's cache (keyed by the
recipe and the manifest/lock files), both with network at build time only; the sandbox on top keeps
none. A layer that fails to build is not committed, and the run goes on on the base image with one
line saying what is missing.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..code.languages import ReportRecipe, Toolchain, Variant, toolchains
from ..git_args import end_of_options
from ..sandbox.images import base_image_tag, image_exists, require_image
from ..sandbox.workspace import RepoSnapshot
from . import devcontainer
from .layers import Layer, LayerBuildError, build_layer

APT = ("export DEBIAN_FRONTEND=noninteractive; apt-get update -qq; "
       "apt-get install -y -qq --no-install-recommends {packages} >/dev/null")
LEAN = "rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* /var/cache/apt/archives/*.deb"
MAX_FILE = 1 << 20
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass
class Detected:
    toolchain: Toolchain
    because: str  # the file that chose it
    variant: Variant | None = None
    version: str = ""  # the version the repository states ('' none)
    version_file: str = ""

    @property
    def test_command(self) -> str:
        return (self.variant.test_command if self.variant and self.variant.test_command else "") or \
            self.toolchain.test_command

    @property
    def label(self) -> str:
        name = self.toolchain.name + (f"/{self.variant.name}" if self.variant else "")
        return name + (f" {self.version}" if self.version else "")


@dataclass
class Environment:
    """What the sandbox starts from: `image` (None: the base image) and the line that says why."""

    image: str | None
    line: str
    detected: Detected | None = None
    missing: str = ""  # why the toolchain could not be set up ('' it was, or none was needed)
    built: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _git(snap: RepoSnapshot, *args: str) -> bytes:
    result = subprocess.run(["git", f"--git-dir={snap.git_dir}", *args], capture_output=True)
    return result.stdout if result.returncode == 0 else b""


def _names(snap: RepoSnapshot, folder: str = "") -> list[str]:
    listing = _git(snap, "ls-tree", "-z", "--name-only", *end_of_options(), f"{snap.commit}:{folder}" if folder else snap.commit)
    return [f"{folder}/{name}" if folder else name for name in listing.decode(errors="replace").split("\0") if name]


def read_file(snap: RepoSnapshot, path: str) -> bytes:
    data = _git(snap, "show", *end_of_options(), f"{snap.commit}:{path}")
    return data[:MAX_FILE]


def detect(snap: RepoSnapshot) -> Detected | None:
    """The repository's toolchain by its files, or None (Python on the base image)."""
    top = set(_names(snap))
    for tool in toolchains():
        found = next((name for name in tool.detect if name in top), None)
        if found is None:
            continue
        if tool.requires_any:
            folders = {pattern.rpartition("/")[0] for pattern in tool.requires_any}
            names = [name for folder in folders for name in (_names(snap, folder) if folder else top)]
            if not any(fnmatch.fnmatch(name, pattern) for name in names for pattern in tool.requires_any):
                continue
        variant = next((v for v in tool.variants if v.when in top), None)
        version, version_file = "", ""
        for file, pattern in tool.versions:
            if file in top:
                match = re.search(pattern, read_file(snap, file).decode(errors="replace"))
                if match:
                    version, version_file = match.group(1).strip(), file
                    break
        return Detected(tool, found, variant, version, version_file)
    return None


@dataclass(frozen=True)
class TestReport:
    """How to run a repository's test suite so that it prints what `log_parser` reads: in /testbed,
    in its toolchain's image, offline."""

    __test__ = False  # not a pytest class
    language: str  # the toolchain's name (go, rust, node, java, c/c++)
    command: str
    log_parser: str  # a name of harness/log_parsers.py's PARSERS


def test_report(snap: RepoSnapshot) -> TestReport | None:
    """The repository's graded test command (the `test_report:` entries of languages/*.yaml): the
    runner its manifest names, else its variant's, else its toolchain's. None: no toolchain detected
    (Python), or none of its runners is named."""
    found = detect(snap)
    if found is None:
        return None
    tool, variant = found.toolchain, found.variant
    recipe: ReportRecipe | None = None
    if tool.runners:
        runner = _runner(tool, snap)
        if runner is not None:
            setup = variant.test_setup if variant else ""
            recipe = ReportRecipe(f"({setup}) && {runner.command}" if setup else runner.command, runner.log_parser)
    else:
        recipe = (variant.test_report if variant else None) or tool.test_report
    return TestReport(tool.name, recipe.command, recipe.log_parser) if recipe else None


test_report.__test__ = False  # type: ignore[attr-defined]  # a test module that imports it: not a test


def _runner(tool: Toolchain, snap: RepoSnapshot) -> ReportRecipe | None:
    """The runner the manifest's `test` script names (a whole word of it), else the first one among
    its dependencies."""
    try:
        manifest = json.loads(read_file(snap, tool.runners_from) or b"{}")
    except ValueError:
        return None
    if not isinstance(manifest, dict):
        return None
    scripts = manifest.get("scripts")
    script = " ".join(str((scripts if isinstance(scripts, dict) else {}).get("test") or "").split())
    for runner in tool.runners:
        if re.search(rf"(^|[\s;&|(/]){re.escape(runner.name)}($|[\s;&|)])", script):
            return runner.test_report
    names: set[str] = set()
    for key in ("devDependencies", "dependencies"):
        dependencies = manifest.get(key)
        names |= set(dependencies) if isinstance(dependencies, dict) else set()
    return next((runner.test_report for runner in tool.runners if runner.name in names), None)


def _digest(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower().replace("+", "p")).strip("-")


def toolchain_layer(found: Detected, base: str) -> Layer:
    tool, variant = found.toolchain, found.variant
    steps = [APT.format(packages=" ".join(tool.packages))] if tool.packages else []
    steps += [step for step in (tool.install, variant.install if variant else "") if step]
    if tool.version_install and found.version:
        steps.append(f"VERSION={shlex.quote(found.version)}\n{tool.version_install}")
    steps += [LEAN, tool.version_command or "true"]
    script = "\n".join(steps)
    tag = f"codeagent/lang-{_slug(tool.name)}:{_digest(base, script, tool.env)}"
    return Layer(tag=tag, parent=base, script=script, env=dict(tool.env), network=True, timeout=1800)


def dependencies_layer(found: Detected, parent: str, snap: RepoSnapshot) -> Layer | None:
    """The repository's dependencies fetched into the language's cache: None when the recipe has no
    fetch step or the repository none of its manifests. The repository is copied in for the fetch
    and removed after; the key is the manifests' content, not the whole tree."""
    tool, variant = found.toolchain, found.variant
    prefetch = (variant.prefetch if variant and variant.prefetch else "") or tool.prefetch
    top = set(_names(snap))
    manifests = {name: hashlib.sha256(read_file(snap, name)).hexdigest() for name in tool.manifests if name in top}
    if not prefetch or prefetch == "true" or not manifests:
        return None
    script = f"cd /testbed\n{prefetch}\ncd /\nrm -rf /testbed"
    tag = f"codeagent/lang-{_slug(tool.name)}-deps:{_digest(parent, script, manifests)}"
    return Layer(tag=tag, parent=parent, script=script, network=True, tree=snap, timeout=1800)


def resolve(snap: RepoSnapshot, image: str | None = None, *, base: str | None = None, build: bool = True,
            log: Callable[[str], None] | None = None, trusted: bool = False) -> Environment:
    """The environment of the repository at `snap`: its devcontainer when `trusted`, else `image` (the
    user's `sandbox.image`), else its detected toolchain on `base`. Builds the missing layers
    (`build`=False: only says what would be used). A devcontainer that is not used says why in the line."""
    chosen, note = _devcontainer(snap, build, log, trusted)
    if chosen is not None:
        return chosen
    environment = _configured_or_detected(snap, image, base, build, log)
    if note:
        environment.line += f"; {note}"
    return environment


def _devcontainer(snap: RepoSnapshot, build: bool, log: Callable[[str], None] | None,
                  trusted: bool) -> tuple[Environment | None, str]:
    from docker.errors import APIError

    path = devcontainer.find(snap)
    if path is None:
        return None, ""
    if not trusted:
        return None, (f"{path} ignored: the repository is not trusted and building it runs its commands "
                      "(add it to trusted_projects in your config, or run solve with --trust)")
    started = time.monotonic()
    try:
        found = devcontainer.load(snap, path)
        tag = devcontainer.prepare(found, snap, build=build, log=log)
    except devcontainer.DevcontainerError as error:
        return None, f"devcontainer ignored: {error}"
    except (LayerBuildError, APIError) as error:
        return None, f"{path} could not be built: {_tail(error, devcontainer.TAIL_LINES)}"
    return Environment(tag, f"environment: the devcontainer ({path}: {found.what}), image {tag}",
                       seconds=time.monotonic() - started), ""


def _configured_or_detected(snap: RepoSnapshot, image: str | None, base: str | None, build: bool,
                            log: Callable[[str], None] | None) -> Environment:
    if image:
        return Environment(image, f"environment: {image} (sandbox.image in your config)")
    found = detect(snap)
    base = base or base_image_tag()
    if found is None:
        return Environment(None, f"environment: python (no other toolchain detected) on {base}")
    why = found.because + (f", {found.version_file}" if found.version_file and found.version_file != found.because else "")
    started = time.monotonic()
    built: list[str] = []
    if build:
        require_image(base)  # no base image: the same one line as any sandbox (`codeagent sandbox build`)
    from docker.errors import APIError

    try:
        layer = toolchain_layer(found, base)
        if build and not image_exists(layer.tag) and log:
            log(f"setting up the {found.toolchain.name} toolchain (once; minutes)…")
        layers = [layer]
        if build:
            _build(layer, built)
        deps = dependencies_layer(found, layer.tag, snap)
        if deps is not None:
            layers.append(deps)
            if build:
                _build(deps, built)
    except (LayerBuildError, APIError) as error:
        missing = (f"the {found.toolchain.name} toolchain could not be set up ({_tail(error, 1)[:300]}); running on "
                   f"the base image: set sandbox.image in your config to an image that has it")
        return Environment(None, f"environment: {missing}", found, missing, built, time.monotonic() - started)
    chosen = layers[-1].tag
    return Environment(chosen, f"environment: {found.label} ({why}) on {base}, image {chosen}", found,
                       built=built, seconds=time.monotonic() - started)


def _tail(error: Exception, count: int) -> str:
    """The last `count` non-empty lines of a build error, on one line."""
    lines = [line.strip() for line in ANSI.sub("", str(error)).splitlines() if line.strip()]
    return " | ".join(lines[-count:]) if lines else type(error).__name__


def _build(layer: Layer, built: list[str]) -> None:
    if build_layer(layer).built:
        built.append(layer.tag)
