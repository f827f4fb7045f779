"""The layers of a repository's environment above the base image (env_toolchain.resolve for a user's
repository, env_language for a language task), built with harness/layers/layer.py:

    toolchain    one per toolchain installed (the primary's first): with network, codeagent's recipes only
                 (Debian packages, the stated version from the npm registry or the Go module proxy, the
                 package manager at `packageManager`); what it installed is noted in the image's labels
    dependencies one per toolchain with a `fetch`: the repository copied in, with network, and declarative
                 fetches only: lockfile-driven installs with install scripts off, `cargo fetch`, `go mod
                 download`, Maven's resolver with the poms' build extensions taken out. The tools' own
                 configuration that names programs to run (`hide`: .cargo/config.toml, .mvn/, .yarnrc) is set
                 aside while it runs. A trusted repository runs `fetch_trusted` instead (install scripts
                 on). Keyed by the dependency files, so neighbouring commits share it.
    build        the primary's `build`, with NO network: install from the caches, compile once (`cargo
                 test --no-run`, `go test` of every package, `mvn test-compile`, the CMake build tree), so a
                 sandbox or a graded run compiles only what changed. The repository's own code may run here;
                 it never has network. A build that fails is kept all the same (what it made is still
                 there) and said (`build_failed`). When its output names what the fetch missed (`missing`:
                 Maven's test-runner provider), that is fetched declaratively on the dependencies layer (never
                 on a layer the repository's code ran in) and the build runs again.

What a layer made in /testbed (node_modules/, target/, build/) is kept, the repository's own files are
removed, and INSTALLED lists what is kept: the sandbox's tree comes on top and leaves it out of its
commits and diffs (sandbox/workspace.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from ...sandbox.workspace import BUILT_FROM, INSTALLED, RepoSnapshot
from ..layers.layer import Layer
from ..specs.toolchains import Toolchain
from .detect import Detected, RepoFiles

APT = ("export DEBIAN_FRONTEND=noninteractive; apt-get update -qq; "
       "apt-get install -y -qq --no-install-recommends {packages} >/dev/null")
LEAN = "rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* /var/cache/apt/archives/*.deb"
NOTES = "/etc/codeagent/notes"
SCRIPTS = "/usr/local/lib/codeagent"  # where a recipe finds the harness's scripts (node_versions.py)
SHIPPED = ("node_versions.py",)
HIDDEN = "/tmp/codeagent-hidden"
BUILD_STATUS = re.compile(r"^codeagent: the build step exited (\d+)$", re.M)
MISSING_ROUNDS = 16  # each round may name one more (jsoup: 4 rounds; JSON-java: a plugin a round, 9 and more)
_SAFE = re.compile(r"^[\w.+-]{1,200}$")

# Keep what the step made in /testbed, remove the repository's own files (the sandbox's tree comes on top).
KEEP_INSTALLED = f"""cd /testbed
mkdir -p "$(dirname {INSTALLED})"
git -c core.quotePath=false ls-files --others --directory | sed -e 's/[][*?!#\\\\]/\\\\&/g' -e 's|^|/|' > {INSTALLED}
git ls-files -z | xargs -0 -r rm -f --
rm -rf .git"""


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower().replace("+", "p")).strip("-")


def digest(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


def toolchain_script(found: Detected) -> str:
    tool, variant = found.toolchain, found.variant
    note = f"{NOTES}/{slug(tool.name)}"
    steps = [APT.format(packages=" ".join(tool.packages))] if tool.packages else []
    steps += [f"mkdir -p {NOTES}"]
    steps += [tool.install] if tool.install else []
    version = "" if _packaged(found.version, tool.packaged_version) else found.version
    if tool.version_install and (version or tool.default_version):
        steps.append(f"VERSION={shlex.quote(version)}; DEFAULT_VERSION={shlex.quote(tool.default_version)}\n"
                     f"{tool.version_install}")
    if variant and variant.install:
        steps.append(f"PM_VERSION={shlex.quote(found.pm_version)}\n{variant.install}")
    steps += [LEAN]
    if tool.version_command:  # it must answer; its first lines are the note unless the recipe wrote one
        steps.append(f"({tool.version_command}) > /tmp/codeagent-version 2>&1 || {{ cat /tmp/codeagent-version; exit 1; }}\n"
                     f"[ -s {note} ] || head -n 3 /tmp/codeagent-version > {note}; rm -f /tmp/codeagent-version")
    return "\n".join(steps)


def _packaged(version: str, packaged: str) -> bool:
    """Is the stated `version` (a plain version) one the Debian packages already give (not above `packaged`)?"""
    numbers = [tuple(int(part) for part in re.findall(r"\d+", text)) for text in (version, packaged)]
    plain = re.fullmatch(r"v?\d+(\.\d+)*", version.strip() or "x")
    return bool(packaged and plain and numbers[0] and numbers[0] <= numbers[1])


def toolchain_layer(found: Detected, parent: str) -> Layer:
    script = toolchain_script(found)
    files = {f"{SCRIPTS}/{name}": (Path(__file__).parent / name).read_bytes() for name in SHIPPED if name in script}
    tag = f"codeagent/lang-{slug(found.toolchain.name)}:{digest(parent, script, found.toolchain.env, files)}"
    return Layer(tag=tag, parent=parent, script=script, env=dict(found.toolchain.env), network=True, timeout=1800,
                 files=files, notes_from=NOTES)


def dependency_key(tool: Toolchain, files: RepoFiles) -> dict[str, str]:
    """{path: sha256} of the files that define what the fetch gets (the manifests and lockfiles, anywhere)."""
    paths = files.matching(tool.dependency_files)
    files.prefetch(paths)
    return {path: hashlib.sha256(files.read(path)).hexdigest() for path in paths}


@dataclass
class Fetch:
    """The dependencies step of one toolchain: `layer` (None: none to run) and what it does, in one line."""

    layer: Layer | None
    what: str = ""


def fetch_step(found: Detected, parent: str, snap: RepoSnapshot, files: RepoFiles, trusted: bool) -> Fetch:
    tool, variant = found.toolchain, found.variant
    fetch = (variant.fetch if variant and variant.fetch else "") or tool.fetch
    if trusted:
        fetch = (variant.fetch_trusted if variant and variant.fetch_trusted else "") or tool.fetch_trusted or fetch
    key = dependency_key(tool, files)
    if not fetch or not key:
        return Fetch(None)
    hide = "" if trusted else "\n".join(
        f'if [ -e {shlex.quote(path)} ]; then mkdir -p "{HIDDEN}/$(dirname {shlex.quote(path)})"; '
        f"mv {shlex.quote(path)} {HIDDEN}/{shlex.quote(path)}; fi" for path in tool.hide)
    script = "\n".join(part for part in ("cd /testbed", hide, fetch, KEEP_INSTALLED, f"rm -rf {HIDDEN}") if part)
    tag = f"codeagent/lang-{slug(tool.name)}-deps:{digest(parent, script, key)}"
    scripts = "install scripts on: the repository is trusted" if trusted else "no repository code ran"
    return Fetch(Layer(tag=tag, parent=parent, script=script, env=dict(tool.env), network=True, tree=snap, timeout=1800),
                 what=f"{found.name}: {fetch.splitlines()[0][:120]} ({scripts})")


def build_script(found: Detected) -> str:
    tool, variant = found.toolchain, found.variant
    build = (variant.build if variant and variant.build else "") or tool.build
    if not build:
        return ""
    return (f"cd /testbed\nstarted=$(( $(date +%s) - 1 ))\nset +e\n(\nset -e\n{build}\n)\nstatus=$?\nset -e\n"
            f"echo \"codeagent: the build step exited $status\"\n{record_built(BUILT_FROM)}")


def record_built(path: str) -> str:
    """What the build compiled from (`git ls-files -s`), dated at the build's start: sandbox/workspace.py's
    INIT_REPO_SCRIPT keeps the files a sandbox's tree has the same older than the build's outputs. A tracked
    file the build changed is left out (its outputs are not the committed file's): rebuilt."""
    return (f'mkdir -p "$(dirname {path})"\n'
            "git update-index -q --refresh >/dev/null 2>&1 || true\n"
            "git -c core.quotePath=false ls-files -m > /tmp/codeagent-changed\n"
            "git -c core.quotePath=false ls-files -s | awk -F '\\t' "
            f"'FILENAME == ARGV[1] {{ changed[$0] = 1; next }} !($2 in changed)' /tmp/codeagent-changed - > {path}\n"
            f'rm -f /tmp/codeagent-changed\ntouch -d "@$started" {path}')


def build_layer(found: Detected, parent: str, snap: RepoSnapshot, files: RepoFiles) -> Layer | None:
    """The primary's build on `parent`, without network; keyed by the dependency files (the repository's
    own outputs are rebuilt where its files changed: sandbox/workspace.py's INIT_REPO_SCRIPT)."""
    build = build_script(found)
    if not build:
        return None
    tool = found.toolchain
    script = f"{build}\n{KEEP_INSTALLED}"
    tag = f"codeagent/lang-{slug(tool.name)}-build:{digest(parent, script, dependency_key(tool, files))}"
    return Layer(tag=tag, parent=parent, script=script, env=dict(tool.env), network=False, tree=snap, timeout=3600,
                 needs=missing_in(tool))


def build_failed(output: bytes) -> int:
    """The build step's exit status in its output (0: it succeeded, or none ran)."""
    found = BUILD_STATUS.findall(output.decode("utf-8", errors="replace"))
    return int(found[-1]) if found else 0


def missing_in(tool: Toolchain):
    """The function that reads, in a build's output, the fetch steps for what it lacks (None: the
    toolchain says nothing of it)."""
    if not tool.missing:
        return None
    rules = [(re.compile(rule.pattern), rule.fetch) for rule in tool.missing]

    def needs(output: str) -> list[str]:
        steps = []
        for pattern, fetch in rules:
            for match in pattern.finditer(output):
                groups = {key: value or "" for key, value in match.groupdict().items()}
                if all(not value or _SAFE.match(value) for value in groups.values()):  # the build's output: untrusted
                    steps.append(fetch.format(**groups))
        return sorted(set(steps))

    return needs


def missing_layer(found: Detected, fetched: str, steps: list[str]) -> Layer:
    """The fetch of what a build lacked, on the dependencies layer `fetched` (not on the build's): no
    repository here, only the declarative steps."""
    script = "mkdir -p /tmp/codeagent-fetch && cd /tmp/codeagent-fetch\n" + "\n".join(steps)
    tag = f"codeagent/lang-{slug(found.toolchain.name)}-deps:{digest(fetched, script)}"
    return Layer(tag=tag, parent=fetched, script=script, env=dict(found.toolchain.env), network=True, timeout=1800)


def with_missing(found: Detected, fetched: str | None, layer: Layer, build) -> tuple[Layer, bytes]:
    """Build `layer` with `build(layer) -> BuildResult`; while its output names what the fetch missed, fetch
    that on the dependencies layer `fetched` and build again there (the final image also tagged as `layer`'s
    tag, so the next start finds it at once). Returns (the layer built, its result)."""
    import dataclasses

    from ..layers.layer import LayerNeeds

    original, steps = layer.tag, []
    for round_ in range(MISSING_ROUNDS + 1):
        try:
            output = build(layer)
            return layer, output if isinstance(output, bytes) else b""
        except LayerNeeds as needs:
            new = [step for step in needs.needed if step not in steps]
            if fetched is None or not new or round_ == MISSING_ROUNDS:  # nothing more to fetch: keep what it made
                layer = dataclasses.replace(layer, needs=None)
                continue
            steps += new
            fetch = missing_layer(found, fetched, steps)
            build(fetch)
            repository = original.rpartition(":")[0]
            layer = dataclasses.replace(layer, parent=fetch.tag, tag=f"{repository}:{digest(original, steps)}",
                                        also_tag=[original])
    output = build(dataclasses.replace(layer, needs=None))
    return layer, output if isinstance(output, bytes) else b""
