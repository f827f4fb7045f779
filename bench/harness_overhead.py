"""Harness overhead per instance with a warm image cache, and what a second run rebuilds.

Side by side in one run: the full harness (`grade_task`: images looked up, container, patch
applied, tests reset and patched, test command, log parsed, graded) against the bare test command
run by one `docker exec` in an already started container of the same instance image; then where the
harness's time goes, step by step (the report's phase_seconds).
Usage: python bench/harness_overhead.py [--runs 5] [--dataset lite --instance ID --repos DIR]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from codeagent.evals.batch import grade_task
from codeagent.harness.layers.python_env import task_images
from codeagent.harness.specs.directives import test_command
from codeagent.harness.specs.swebench import spec_for
from codeagent.sandbox.engine import docker_client
from codeagent.task import Task


def synthetic_task() -> Task:
    import subprocess

    root = Path(tempfile.mkdtemp(prefix="codeagent-bench-")) / "calc"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "tests" / "test_calc.py").write_text("from calc import add\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n")
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b",
           "PATH": "/usr/bin:/bin"}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "c"]):
        subprocess.run(cmd, cwd=root, check=True, env=env)
    test_patch = ("diff --git a/tests/test_calc.py b/tests/test_calc.py\n--- a/tests/test_calc.py\n"
                  "+++ b/tests/test_calc.py\n@@ -3,3 +3,7 @@ from calc import add\n \n def test_zero():\n"
                  "     assert add(0, 0) == 0\n+\n+\n+def test_add():\n+    assert add(2, 3) == 5\n")
    gold = ("diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
            "-    return a - b\n+    return a + b\n")
    config = {"python": "3.11", "system_packages": [], "pip_packages": ["pytest"], "install": [],
              "test_cmd": "python -m pytest -rA", "log_parser": "pytest", "directives": "paths", "test_timeout": 60}
    return Task(repo=str(root), instance_id="bench__calc-1", problem_statement="add", test_patch=test_patch,
                gold_patch=gold, FAIL_TO_PASS=["tests/test_calc.py::test_add"],
                PASS_TO_PASS=["tests/test_calc.py::test_zero"], extra={"install_config": config})


def bare_test_seconds(task: Task, runs: int) -> list[float]:
    spec = spec_for(task)
    image = task_images(task, spec).instance
    container = docker_client().containers.run(image, ["sleep", "infinity"], detach=True, network_mode="none")
    try:
        command = test_command(task, spec)
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            container.exec_run(["bash", "-c", f"cd /testbed && {command}"])
            times.append(time.perf_counter() - start)
        return times
    finally:
        container.remove(force=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dataset")
    parser.add_argument("--instance")
    parser.add_argument("--repos")
    args = parser.parse_args()
    if args.instance:
        from codeagent.data import load_tasks

        task = load_tasks(args.dataset, instance_ids=[args.instance])[0]
        task = task.model_copy(update={"repo": str(Path(args.repos) / task.swebench_repo)})
    else:
        task = synthetic_task()
    with tempfile.TemporaryDirectory() as tmp:
        first = grade_task(task, task.gold_patch or "", Path(tmp) / "first")
        print(f"{task.instance_id}: first run {first['total_seconds']:.1f}s, built {first.get('layers_built')}, "
              f"resolved={first['resolved']}")
        totals, tests, images, rebuilt, steps = [], [], [], [], []
        for index in range(args.runs):
            report = grade_task(task, task.gold_patch or "", Path(tmp) / f"warm{index}")
            totals.append(report["total_seconds"])
            tests.append(report.get("test_seconds", 0.0))
            images.append(report.get("image_seconds", 0.0))
            rebuilt.extend(report.get("layers_built") or [])
            steps.append(report.get("phase_seconds") or {})
    bare = bare_test_seconds(task, args.runs)
    harness, test_only, bare_median = statistics.median(totals), statistics.median(tests), statistics.median(bare)
    print(f"warm runs: {args.runs}; layers rebuilt on warm runs: {len(rebuilt)}")
    print(f"  harness total           median {harness:6.2f}s")
    print(f"  test command inside it  median {test_only:6.2f}s")
    print(f"  image lookup            median {statistics.median(images):6.2f}s")
    print(f"  bare test (docker exec) median {bare_median:6.2f}s")
    print(f"  overhead (total - test): {harness - test_only:.2f}s per instance; total / bare test: {harness / bare_median:.2f}x")
    print("  the grading container's steps, median s: " + "  ".join(
        f"{name} {statistics.median(each.get(name, 0.0) for each in steps):.3f}" for name in steps[-1]))


if __name__ == "__main__":
    main()
