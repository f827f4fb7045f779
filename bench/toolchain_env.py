"""The repository's toolchain in the sandbox: first environment build and cached sandbox start per
language, Python's beside them (issue 22: the cached start within 1.5x of Python's).

First build: the language's layers (toolchain, then dependencies) removed if there and built
again, timed (--first; without it the figure is the cached resolve). Cached start: resolving the
environment + starting a sandbox on it + its first command + closing it, the median of --runs.
Usage: python bench/toolchain_env.py [--first] [--runs 5] [--languages go,rust,node,maven,c]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from codeagent.harness.env_toolchain import dependencies_layer, detect, resolve, toolchain_layer
from codeagent.sandbox import open_sandbox, snapshot
from codeagent.sandbox.engine import docker_client
from codeagent.sandbox.images import base_image_tag, image_exists

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "toolchains"
PYTHON_REPO = {"calc.py": "def add(a, b):\n    return a + b\n", "test_calc.py": "from calc import add\n"}


def repo_of(name: str, root: Path) -> Path:
    repo = root / name
    if name == "python":
        repo.mkdir()
        for path, text in PYTHON_REPO.items():
            (repo / path).write_text(text)
    else:
        shutil.copytree(DATA / name, repo)
    subprocess.run("git init -q && git add -A && git -c user.name=b -c user.email=b@b commit -qm bench",
                   shell=True, cwd=repo, check=True)
    return repo


def drop_layers(snap) -> None:
    found, base = detect(snap), base_image_tag()
    if found is None:
        return
    layer = toolchain_layer(found, base)
    deps = dependencies_layer(found, layer.tag, snap)
    for tag in [deps.tag] if deps else []:
        if image_exists(tag):
            docker_client().images.remove(tag, force=True)
    if image_exists(layer.tag):
        docker_client().images.remove(layer.tag, force=True)


def cached_start(snap) -> float:
    started = time.perf_counter()
    environment = resolve(snap)
    with open_sandbox(snap, image=environment.image) as box:
        box.run("true")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--first", action="store_true", help="remove each language's layers and time their build")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--languages", default="go,rust,node,maven,c")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="codeagent-bench-") as tmp:
        for name in ["python", *args.languages.split(",")]:
            snap = snapshot(repo_of(name, Path(tmp)))
            if args.first:
                drop_layers(snap)
            started = time.perf_counter()
            environment = resolve(snap)
            first = time.perf_counter() - started
            cached_start(snap)  # the workspace image on it, once
            starts = [cached_start(snap) for _ in range(args.runs)]
            rows.append((name, environment.line, first, statistics.median(starts)))
    python_start = rows[0][3]
    print(f"{'language':<8} {'first build s':>13} {'cached start s':>14} {'vs python':>9}  environment")
    for name, line, first, start in rows:
        print(f"{name:<8} {first:>13.1f} {start:>14.2f} {start / python_start:>8.2f}x  {line}")


if __name__ == "__main__":
    main()
