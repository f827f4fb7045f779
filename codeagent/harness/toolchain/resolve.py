"""A user's repository's environment: its language toolchains, dependencies and build, on the base image.

Resolved in order (a task's own environment spec is the harness's, before this): the repository's
devcontainer, only when the user trusts the repository (harness/layers/devcontainer.py; an untrusted,
malformed or failing one is said in the line, and the next choice is used); `sandbox.image` from the
user's config; else the toolchains detected by evidence (detect.py) and their layers (deps.py:
toolchain -> dependencies -> build, built once and cached by content); else Python on the base image.

Never silently without the language: a step that fails keeps every layer below it (a failed dependencies
step keeps the toolchain), and says what failed in `warnings`, each with the path of its full build log
and the log's last lines. Only when the primary toolchain itself cannot be set up does the sandbox run on
the base image, and that is said too.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...sandbox.images import base_image_tag, image_exists, require_image
from ...sandbox.workspace import ENVIRONMENT_NOTE, RepoSnapshot
from ..layers import devcontainer
from ..layers.layer import Layer, LayerBuildError, LayerNeeds, image_notes
from ..layers.layer import build_layer as build_image
from .deps import APT, LEAN, build_failed, build_layer, digest, fetch_step, slug, toolchain_layer, with_missing
from .detect import Detected, Detection, RepoFiles, detect, detect_all
from .kept import build_warning, forget, log_path, note, renew_failed_build, stale
from .test_command import TestReport, human_test_command, test_report

__all__ = ["APT", "LEAN", "Detected", "Environment", "TestReport", "detect", "detect_all", "resolve", "test_report",
           "toolchain_layer"]

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
TAIL_LINES = 30
PROGRESS = re.compile(r"^\s*(Progress: |\++\s*$)")  # a package manager's progress lines say nothing of a failure
RETRY_AFTER = 3600  # seconds before a step that failed is built again (its warning is said meanwhile)


@dataclass
class Environment:
    """What the sandbox starts from: `image` (None: the base image) and the line that says why."""

    image: str | None
    line: str
    detected: Detected | None = None
    missing: str = ""  # why the primary toolchain could not be set up ('' it was, or none was needed)
    built: list[str] = field(default_factory=list)
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)  # a step that failed: what, its log, its last lines
    test_command: str = ""
    installed: list[str] = field(default_factory=list)  # what each toolchain layer says it installed


def resolve(snap: RepoSnapshot, image: str | None = None, *, base: str | None = None, build: bool = True,
            log: Callable[[str], None] | None = None, trusted: bool = False) -> Environment:
    """The environment of the repository at `snap`: its devcontainer when `trusted`, else `image` (the
    user's `sandbox.image`), else its detected toolchains on `base`. Builds the missing layers
    (`build`=False: only says what would be used). A devcontainer that is not used says why in the line."""
    chosen, note = _devcontainer(snap, build, log, trusted)
    if chosen is not None:
        return chosen
    environment = _configured_or_detected(snap, image, base, build, log, trusted)
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


def failure(step: str, error: Exception, path: Path | None) -> str:
    """What failed, where its full log is, and the log's last lines."""
    output = getattr(error, "output", b"") or b""
    text = ANSI.sub("", output.decode("utf-8", errors="replace") if output else str(error))
    lines = [line.rstrip() for line in text.splitlines() if line.strip() and not PROGRESS.match(line)][-TAIL_LINES:]
    where = f"; full log: {path}" if path and path.exists() else ""
    return f"the {step} step failed{where}; its last lines:\n" + "\n".join(f"  | {line}" for line in lines)


class _Failed(Exception):
    pass


class _Chain:
    """Builds the layers of `resolve` one on another, noting what was built and what failed."""

    def __init__(self, build: bool, log: Callable[[str], None] | None):
        from docker.errors import APIError

        self.build, self.log = build, log
        self.built: list[str] = []
        self.warnings: list[str] = []
        self.errors = (LayerBuildError, APIError)

    def run(self, step: str, layer: Layer) -> bytes:
        """Build it: its output (b'' when cached); _Failed when it failed (noted); LayerNeeds passes."""
        if not self.build:
            return b""
        path = log_path(layer.tag)
        failed = path.with_suffix(".failed")
        if failed.exists() and stale(failed):
            forget(failed)
        if failed.exists() and time.time() - failed.stat().st_mtime < RETRY_AFTER and not image_exists(layer.tag):
            self.warnings.append(f"{failed.read_text()}\n  (as it failed at {time.strftime('%H:%M', time.localtime(failed.stat().st_mtime))}"
                                 f"; tried again {RETRY_AFTER // 60} minutes after, or at once without {failed})")
            raise _Failed
        if self.log and not step.startswith("environment") and not image_exists(layer.tag):
            self.log(f"building the {step} layer (once; minutes; log: {path})…")
        try:
            result = build_image(layer, path)
        except LayerNeeds:
            raise
        except self.errors as error:
            self.warnings.append(failure(step, error, getattr(error, "log_path", None) or path))
            note(failed, self.warnings[-1])  # not tried again at every start: said again instead
            raise _Failed from error
        if result.built:
            self.built.append(layer.tag)
        return result.output

    def tried(self, step: str, layer: Layer) -> bool:
        try:
            self.run(step, layer)
        except _Failed:
            return False
        return True

    def build_step(self, found: Detected, layer: Layer, fetched: str | None) -> str | None:
        """The build layer (with what its output says the fetch missed): its tag, None when it failed."""
        kept = build_warning(layer.tag)
        if self.build and (refused := renew_failed_build(layer.tag)):  # kept as it is (said), not a reason to stop
            self.warnings.append(refused)
        try:
            built, output = with_missing(found, fetched, layer, lambda each: self.run(f"{found.name} build", each))
        except (_Failed, LayerNeeds):
            return None
        status = build_failed(output) if output else 0
        if status:
            warning = failure(f"{found.name} build (it exited {status}; what it built is kept)",
                              LayerBuildError(built.tag, "", None, output), log_path(built.tag))
            note(kept, warning)
        elif output:  # built anew and it succeeded: an older failure is no longer said
            forget(kept)
        if kept.exists():  # said again at every start, not only the first
            self.warnings.append(kept.read_text())
        return built.tag


def _configured_or_detected(snap: RepoSnapshot, image: str | None, base: str | None, build: bool,
                            log: Callable[[str], None] | None, trusted: bool) -> Environment:
    if image:
        return Environment(image, f"environment: {image} (sandbox.image in your config)")
    detection = detect_all(snap)
    base = base or base_image_tag()
    if not detection.installed:
        return Environment(None, f"environment: python (no other toolchain detected) on {base}")
    started, files, chain = time.monotonic(), RepoFiles(snap), _Chain(build, log)
    cached = _cached(detection, snap, files, base, trusted) if build else None
    if cached is not None:  # every layer is there: two questions to the engine, not one per layer
        cached.seconds = time.monotonic() - started
        return cached
    if build:
        require_image(base)  # no base image: the same one line as any sandbox (`codeagent sandbox build`)
    primary, top, installed = detection.primary, base, []
    for found in detection.installed:  # the primary's first
        layer = toolchain_layer(found, top)
        if not chain.tried(f"{found.name} toolchain", layer):
            if found is primary:
                missing = (f"the {found.toolchain.name} toolchain could not be set up: running on the base image "
                           "(set sandbox.image in your config to an image that has it)")
                return Environment(None, f"environment: {missing}", primary, missing, chain.built,
                                   time.monotonic() - started, chain.warnings)
            continue
        top = layer.tag
        installed.append(found)
    fetched: str | None = None  # the primary's dependencies layer
    said: list[str] = []
    unfetched = False  # the primary's dependencies are not there: its build would fail for that alone
    for found in installed:
        step = fetch_step(found, top, snap, files, trusted)
        if step.layer is not None and chain.tried(f"{found.name} dependencies", step.layer):
            top = step.layer.tag
            fetched = top if found is primary else fetched
            said.append(step.what)
            continue
        elif step.layer is None:
            continue
        unfetched = unfetched or found is primary
        said.append(f"{found.name}: not installed (see the warnings)")
    if primary in installed and not unfetched and (layer := build_layer(primary, top, snap, files)) is not None:
        top = chain.build_step(primary, layer, fetched) or top
    environment = _described(detection, installed, base, top, said, chain, files)
    environment.seconds = time.monotonic() - started
    return environment


def _cached(detection: Detection, snap: RepoSnapshot, files: RepoFiles, base: str, trusted: bool) -> Environment | None:
    """The environment when every step succeeded before and its last layer is there (None: build, or say why not)."""
    top = base
    for found in detection.installed:
        top = toolchain_layer(found, top).tag
    said, fetched = [], None
    for found in detection.installed:
        step = fetch_step(found, top, snap, files, trusted)
        if step.layer is not None:
            top = step.layer.tag
            fetched = top if found is detection.primary else fetched
            said.append(step.what)
    warnings = []
    if detection.primary is not None and (layer := build_layer(detection.primary, top, snap, files)) is not None:
        top = layer.tag
        if build_warning(top).exists() and stale(build_warning(top)):
            return None  # a failed build kept under other code: the chain builds it again
        warnings = [build_warning(top).read_text()] if build_warning(top).exists() else []
    final = note_tag(top, said, warnings)
    if not image_exists(final):
        return None
    chain = _Chain(True, None)
    chain.warnings = warnings
    return _described(detection, detection.installed, base, top, said, chain, files, notes=image_notes(final))


def note_tag(top: str, said: list[str], warnings: list[str]) -> str:
    """The last layer's tag: what it stands on and what its note says (the rest follows from `top`)."""
    return f"codeagent/lang-env:{digest(top, said, [w.splitlines()[0] for w in warnings])}"


def _described(detection: Detection, installed: list[Detected], base: str, top: str, said: list[str], chain: _Chain,
               files: RepoFiles, notes: dict[str, str] | None = None) -> Environment:
    """The environment line, and the note the agent's prompt reads (a last small layer holds it)."""
    primary = detection.primary
    if notes is None:
        notes = image_notes(top) if chain.build and image_exists(top) else {}
    versions = [notes.get(slug(found.toolchain.name)) or found.label for found in installed]
    versions += [notes[name] for found in installed if found.variant and (name := slug(found.variant.name)) in notes]
    versions = [", ".join(line.strip() for line in text.splitlines() if line.strip()) for text in versions]
    versions += [f"the repository states {found.toolchain.name} {found.version}; this image has Debian's (no other is "
                 f"reachable here)" for found in installed if found.version and not found.toolchain.version_install]
    test = human_test_command(primary, files) if primary else "python -m pytest"
    what = primary.label if primary else "python"
    why = ", ".join(dict.fromkeys(found.because for found in installed))
    note = "\n".join([f"- toolchains: {'; '.join(versions)}" + (" (Python is the primary language)" if detection.python else ""),
                      *(f"- dependencies: {line}" for line in said),
                      f"- the repository's test command: {test}",
                      *(["- not set up (see the warnings): " + w.splitlines()[0] for w in chain.warnings])])
    final = Layer(tag=note_tag(top, said, chain.warnings), parent=top, script="true", network=False,
                  final_files={ENVIRONMENT_NOTE: note.encode()})
    if (chain.build and image_exists(final.tag)) or chain.tried("environment note", final):
        top = final.tag
    line = f"environment: {what} ({why}) on {base}, image {top}; {'; '.join(versions)}"
    return Environment(top, line, primary, "", chain.built, 0.0, chain.warnings, test, versions)


def _tail(error: Exception, count: int) -> str:
    """The last `count` non-empty lines of a build error, on one line."""
    lines = [line.strip() for line in ANSI.sub("", str(error)).splitlines() if line.strip()]
    return " | ".join(lines[-count:]) if lines else type(error).__name__
