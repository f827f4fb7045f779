"""Time until N sandboxes on the same repository are ready for their first command.

For N = 1, 4, 8, cold (workspace image not built yet) and warm (cached), several runs.
Target: 8 ready in at most 3x the time of 1. Baseline in the same run: N sequential starts.
Usage: python bench/sandbox_startup.py [--runs 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from _common import scratch_repo

from codeagent.sandbox import snapshot
from codeagent.sandbox.docker import WORKSPACE_IMAGE, DockerSandbox
from codeagent.sandbox.engine import docker_client


def ready_in(snap, n: int, parallel: bool = True) -> float:
    start = time.perf_counter()

    def start_one(_):
        box = DockerSandbox(snap)
        box.run("true")
        return box

    if parallel:
        with ThreadPoolExecutor(n) as pool:
            boxes = list(pool.map(start_one, range(n)))
    else:
        boxes = [start_one(i) for i in range(n)]
    elapsed = time.perf_counter() - start
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda box: box.close(), boxes))
    return elapsed


def engine_floor(image: str, n: int) -> float:
    """N bare `docker run -d IMAGE sleep infinity` in parallel: what the engine alone costs."""
    client = docker_client()
    start = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        containers = list(pool.map(lambda _: client.containers.run(image, ["sleep", "infinity"], detach=True,
                                                                    network_mode="none"), range(n)))
    elapsed = time.perf_counter() - start
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda container: container.remove(force=True), containers))
    return elapsed


def drop_workspace_image(snap) -> None:
    client = docker_client()
    for image in client.images.list(name=WORKSPACE_IMAGE):
        if any(tag.split(":")[-1].startswith(snap.tree[:16]) for tag in image.tags):
            client.images.remove(image.id, force=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", type=int, default=2000, help="files in the scratch repository")
    args = parser.parse_args()
    repo = scratch_repo(args.files)
    snap = snapshot(repo)
    try:
        for mode in ("cold", "warm"):
            results: dict[str, list[float]] = {}
            for _ in range(args.runs):
                for label, n, parallel in (("1", 1, True), ("4 parallel", 4, True), ("8 parallel", 8, True),
                                           ("8 sequential", 8, False)):
                    if mode == "cold":
                        drop_workspace_image(snap)
                    results.setdefault(label, []).append(ready_in(snap, n, parallel))
            if mode == "warm":
                with DockerSandbox(snap) as box:
                    image = box.image
                for _ in range(args.runs):
                    for label, n in (("1 (bare docker run)", 1), ("8 (bare docker run)", 8)):
                        results.setdefault(label, []).append(engine_floor(image, n))
            one = statistics.median(results["1"])
            print(f"{mode} workspace image ({args.files} files, {args.runs} runs, medians):")
            for label, values in results.items():
                print(f"  N={label:13s} {statistics.median(values):6.2f} s   x{statistics.median(values) / one:4.2f} of N=1")
            print(f"  8 parallel / 1: {statistics.median(results['8 parallel']) / one:.2f}x (target <= 3x)")
            if mode == "warm":
                floor = statistics.median(results["8 (bare docker run)"]) / statistics.median(results["1 (bare docker run)"])
                print(f"  the engine alone, 8 / 1 bare docker runs: {floor:.2f}x")
            print()
    finally:
        drop_workspace_image(snap)
        shutil.rmtree(repo, ignore_errors=True)


if __name__ == "__main__":
    main()
