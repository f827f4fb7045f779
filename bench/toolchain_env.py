"""The repository's toolchain in the sandbox: first environment build and cached sandbox start per
language, Python's beside them (issue 22: the cached start within 1.5x of Python's).

First build (--first; without it the figure is the cached resolve): the language's layers (toolchain,
then dependencies) built from scratch under tags of the bench's own (a nonce in the recipe: the shared
images other runs use are not touched), timed, then removed. Cached start: resolving the environment +
starting a sandbox on it + its first command + closing it, the median of --runs (taken round-robin). The `devcontainer` row:
a trusted repository whose devcontainer.json names the base image and a postCreateCommand.
Usage: python bench/toolchain_env.py [--first] [--runs 5] [--languages go,rust,node,maven,c,devcontainer]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from codeagent.harness.layers.layer import build_layer
from codeagent.harness.toolchain.deps import fetch_step
from codeagent.harness.toolchain.detect import RepoFiles
from codeagent.harness.toolchain.resolve import detect, resolve, toolchain_layer
from codeagent.sandbox import open_sandbox, snapshot
from codeagent.sandbox.engine import docker_client
from codeagent.sandbox.images import base_image_tag, image_exists

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "toolchains"
PYTHON_REPO = {"calc.py": "def add(a, b):\n    return a + b\n", "test_calc.py": "from calc import add\n"}


def repo_of(name: str, root: Path, nonce: str = "") -> Path:
    repo = root / name
    if name in ("python", "devcontainer"):
        repo.mkdir()
        for path, text in PYTHON_REPO.items():
            (repo / path).write_text(text)
        if name == "devcontainer":
            (repo / ".devcontainer.json").write_text(json.dumps(
                {"image": base_image_tag(), "postCreateCommand": "python3 -c 'import calc' && touch /opt/ready"}))
            if nonce:  # a tree of its own: its postCreateCommand layer is built from nothing
                (repo / ".bench-nonce").write_text(nonce)
    else:
        shutil.copytree(DATA / name, repo)
    subprocess.run("git init -q && git add -A && git -c user.name=b -c user.email=b@b commit -qm bench",
                   shell=True, cwd=repo, check=True)
    return repo


def first_build(snap) -> float:
    """Seconds to build the language's layers from nothing, under throwaway tags (removed after)."""
    found, base = detect(snap), base_image_tag()
    if found is None:
        return 0.0
    nonce = uuid.uuid4().hex[:12]
    layer = toolchain_layer(found, base)
    layer = dataclasses.replace(layer, tag=f"codeagent/bench-{layer.tag.split('/')[1].split(':')[0]}:{nonce}",
                                script=f": bench {nonce}\n{layer.script}")
    deps = fetch_step(found, layer.tag, snap, RepoFiles(snap), trusted=False).layer
    started = time.perf_counter()
    try:
        build_layer(layer)
        if deps is not None:
            build_layer(deps)
        return time.perf_counter() - started
    finally:
        for tag in ([deps.tag] if deps else []) + [layer.tag]:
            if image_exists(tag):
                docker_client().images.remove(tag, force=True)


def cached_start(snap) -> float:
    started = time.perf_counter()
    environment = resolve(snap, trusted=True)
    with open_sandbox(snap, image=environment.image) as box:
        box.run("true")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--first", action="store_true", help="time each language's layers built from nothing")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--languages", default="go,rust,node,maven,c,devcontainer")
    args = parser.parse_args()
    names = ["python", *args.languages.split(",")]
    snaps, lines, firsts = {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="codeagent-bench-") as tmp:
        throwaway = []
        for name in names:
            nonce = uuid.uuid4().hex if args.first and name == "devcontainer" else ""
            snaps[name] = snap = snapshot(repo_of(name, Path(tmp), nonce))
            started = time.perf_counter()
            environment = resolve(snap, trusted=True)  # builds what is missing (the devcontainer's: --first, always)
            lines[name], firsts[name] = environment.line, time.perf_counter() - started
            if args.first and name != "devcontainer":
                firsts[name] = first_build(snap)
            if nonce and environment.image:
                throwaway.append(environment.image)
            cached_start(snap)  # the workspace image on it, once
        starts: dict[str, list[float]] = {name: [] for name in names}
        for _ in range(args.runs):  # round-robin: the load of the shared machine falls on every row alike
            for name in names:
                starts[name].append(cached_start(snaps[name]))
    for tag in throwaway:
        docker_client().images.remove(tag, force=True)
    rows = [(name, lines[name], firsts[name], statistics.median(starts[name])) for name in names]
    python_start = rows[0][3]
    print(f"{'language':<12} {'first build s':>13} {'cached start s':>14} {'vs python':>9}  environment")
    for name, line, first, start in rows:
        print(f"{name:<12} {first:>13.1f} {start:>14.2f} {start / python_start:>8.2f}x  {line}")


if __name__ == "__main__":
    main()
