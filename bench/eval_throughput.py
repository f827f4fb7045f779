"""Grading throughput: `codeagent eval grade --gold` over a whole repository's instances, --workers = cores.

Three passes over the same instances, in one run:
  1. first pass (cold where the images are missing: they are built): wall time, and per instance the time
     in each phase (images looked up or built, tests, the rest: container, patches, log, verdict);
  2. warm passes (every image present; --runs, medians): instances per hour per core (Epoch AI's Verified run on prebuilt
     images: about 15), and per instance the harness's time over its test command's;
  3. baseline, after each warm pass: the same test command run directly in the same instance image (gold and test patches applied
     untimed, the command by one `docker exec` in a started container), the same number of workers in
     parallel: the harness's overhead per instance is the warm total minus this bare test (target <= 1 s).
Usage: python bench/eval_throughput.py --repo pallets/flask --repos DIR [--dataset lite] [--workers N] [--tree CHECKOUT]
(DIR/owner/name: git mirrors of the repositories; --skip-first when the images are known to be built.)
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from docker.errors import APIError

from codeagent.data.loaders import load_tasks
from codeagent.harness.layers.python_env import task_images
from codeagent.harness.specs.directives import test_command
from codeagent.harness.specs.swebench import spec_for
from codeagent.sandbox.docker import LABEL, owner_labels
from codeagent.sandbox.engine import docker_client
from codeagent.task import Task

HERE = Path(__file__).resolve().parents[1]


def grade_batch(args, output: Path) -> tuple[float, list[dict]]:
    """One `codeagent eval grade --gold` over the selection: (wall seconds, the instances' reports)."""
    command = [sys.executable, "-m", "codeagent.cli", "eval", "grade", "--dataset", args.dataset, "--repo", args.repo,
               "--repos", str(args.repos), "--gold", "--workers", str(args.workers), "--output", str(output)]
    if args.instances:
        command += ["--instances", args.instances]
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(args.tree)})
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"eval grade failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    reports = [json.loads(path.read_text()) for path in sorted(output.glob("instances/*/report.json"))]
    return wall, reports


def _put(container, path: str, data: bytes) -> None:
    stream = io.BytesIO()
    with tarfile.open(fileobj=stream, mode="w") as tar:
        info = tarfile.TarInfo(path.lstrip("/"))
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    container.put_archive("/", stream.getvalue())


def bare_test(task: Task) -> float:
    """Seconds of the task's test command run directly in its instance image, patches applied untimed."""
    spec = spec_for(task)
    image = task_images(task, spec).instance  # present after the passes above: a lookup
    container = docker_client().containers.run(image, ["sleep", "infinity"], detach=True, network_mode="none",
                                               labels={LABEL: "bench", **owner_labels()})  # whose it is: prune keeps it
    try:
        _put(container, "/tmp/bench/gold.patch", (task.gold_patch or "").encode())
        _put(container, "/tmp/bench/test.patch", (task.test_patch or "").encode())
        container.exec_run(["bash", "-c", "cd /testbed && git apply /tmp/bench/gold.patch; "
                                          "git apply /tmp/bench/test.patch"])
        start = time.perf_counter()
        container.exec_run(["bash", "-c", f"cd /testbed && {test_command(task, spec)}"])
        return time.perf_counter() - start
    finally:
        try:
            container.remove(force=True)
        except APIError as error:  # already gone, or being removed
            if error.status_code not in (404, 409):
                raise


def phases(report: dict) -> tuple[float, float, float]:
    total, images, tests = (float(report.get(key) or 0.0) for key in ("total_seconds", "image_seconds", "test_seconds"))
    return images, tests, total - images - tests


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", required=True, help="owner/name, e.g. pallets/flask")
    parser.add_argument("--repos", type=Path, required=True, help="DIR/owner/name git mirrors")
    parser.add_argument("--dataset", default="lite")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--instances", help="a subset (comma-separated ids); default: all of the repository's")
    parser.add_argument("--runs", type=int, default=3, help="warm passes (each followed by a bare one)")
    parser.add_argument("--skip-first", action="store_true", help="no first (cold) pass: the images are built")
    parser.add_argument("--tree", type=Path, default=HERE, help="the codeagent checkout whose `eval grade` runs (another "
                        "one to compare with; default: this one)")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    tasks = [task for task in load_tasks(args.dataset) if task.swebench_repo == args.repo]
    if args.instances:
        wanted = set(args.instances.split(","))
        tasks = [task for task in tasks if task.instance_id in wanted]
    tasks = [task.model_copy(update={"repo": str(args.repos / args.repo)}) for task in tasks]
    print(f"{args.repo}: {len(tasks)} instances of {args.dataset}, --workers {args.workers}, {cores} cores, "
          f"load {os.getloadavg()[0]:.1f}, codeagent from {args.tree}")
    with tempfile.TemporaryDirectory(prefix="codeagent-bench-eval-") as tmp:
        if not args.skip_first:
            wall, reports = grade_batch(args, Path(tmp) / "first")
            built = [report for report in reports if report.get("layers_built")]
            print(f"first pass: {wall:.1f} s wall, {len(built)} of {len(reports)} instances built images")
            for report in reports:
                images, tests, rest = phases(report)
                print(f"  {report['instance_id']:28s} images {images:7.1f} s  tests {tests:6.1f} s  "
                      f"rest {rest:5.1f} s  built {len(report.get('layers_built') or [])} layer(s)  "
                      f"resolved={report.get('resolved')}")
        walls, runs = [], []  # warm passes alternate with the bare baseline: the same load for both
        bare_walls, bare_runs = [], []
        for run in range(args.runs):
            wall, reports = grade_batch(args, Path(tmp) / f"warm{run}")
            walls.append(wall)
            runs.append({report["instance_id"]: report for report in reports})
            start = time.perf_counter()
            with ThreadPoolExecutor(args.workers) as pool:
                bare_runs.append(dict(zip((task.instance_id for task in tasks), pool.map(bare_test, tasks))))
            bare_walls.append(time.perf_counter() - start)
    wall, bare_wall = statistics.median(walls), statistics.median(bare_walls)
    count = len(runs[0])
    resolved = sum(bool(report.get("resolved")) for report in runs[0].values())
    print(f"warm passes: {args.runs}, median {wall:.1f} s wall for {count} instances: {count * 3600 / wall / cores:.1f} "
          f"instances per hour per core (Epoch AI, Verified on prebuilt images: ~15); resolved {resolved}")
    print(f"baseline (bare test commands, same workers): median {bare_wall:.1f} s wall: "
          f"{count * 3600 / bare_wall / cores:.1f} instances per hour per core; harness/bare wall {wall / bare_wall:.2f}x")
    overheads = []
    for instance in runs[0]:
        reports = [each[instance] for each in runs if instance in each]
        total = statistics.median(float(report["total_seconds"]) for report in reports)
        images, tests, rest = (statistics.median(phases(report)[index] for report in reports) for index in range(3))
        alone = statistics.median(each[instance] for each in bare_runs if instance in each)
        overheads.append(total - alone)
        print(f"  {instance:28s} harness {total:6.2f} s (images {images:.2f}, tests {tests:.2f}, rest {rest:.2f})  "
              f"bare test {alone:6.2f} s  overhead {overheads[-1]:5.2f} s  (medians of {len(reports)})")
        steps = [report.get("phase_seconds") or {} for report in reports]
        print("    the grading container's steps, median s: " + "  ".join(
            f"{name} {statistics.median(each.get(name, 0.0) for each in steps):.2f}" for name in steps[-1]))
    print(f"harness overhead per instance over the bare test: median {statistics.median(overheads):.2f} s, "
          f"max {max(overheads):.2f} s over {len(overheads)} instances (target <= 1 s)")

if __name__ == "__main__":
    main()
