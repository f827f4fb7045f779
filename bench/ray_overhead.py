"""What Ray costs per task: a batch of N cheap work units, local process executor vs Ray, side by side.

Each unit goes through the batch code's shipped-results path (`_drive_shipped`: the driver records
the report and a test log of --log-kb into a batch directory, once) and does --work seconds of
"sandbox" time (a sleep: the cost of Docker itself is not what is measured here). With K slots on
both sides:

    overhead per task = wall * K / N - work

Ray's start (`ray.init`, one-node cluster here) is printed apart: it is paid once per batch, not
per task. On a real cluster, --address and --work of a real instance give the curve's per-node rate.
Usage: python bench/ray_overhead.py [--tasks 200] [--slots 2] [--work 0.0] [--log-kb 64] [--address ADDR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from codeagent.evals.batch import _drive_shipped  # noqa: E402
from codeagent.evals.runner import BatchDir  # noqa: E402
from codeagent.executors.local import LocalExecutor  # noqa: E402


def unit(job: tuple[dict, float, int]) -> dict:
    """A stand-in for grade_shipped: some work, then a report and a test log to ship back."""
    task, seconds, log_bytes = job
    if seconds:
        time.sleep(seconds)
    return {"report": {"instance_id": task["instance_id"], "resolved": True, "outcome": "resolved"},
            "files": {"test_output.txt": b"PASSED tests/test_x.py::test_y\n" * (log_bytes // 32)}}


def timed_batch(executor, count: int, work: float, log_kb: int) -> float:
    jobs = [({"instance_id": f"bench__unit-{index}"}, work, log_kb * 1024) for index in range(count)]
    with tempfile.TemporaryDirectory(prefix="codeagent-bench-") as out:
        batch = BatchDir(out)
        done = []
        started = time.perf_counter()
        _drive_shipped(batch, executor, unit, jobs, done.append)
        wall = time.perf_counter() - started
        assert len(done) == count and not batch.pending(j[0]["instance_id"] for j in jobs)
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--slots", type=int, default=2, help="local workers = Ray sandbox slots")
    parser.add_argument("--work", type=float, default=0.0, help="seconds of work per unit")
    parser.add_argument("--log-kb", type=int, default=64, help="size of the test log shipped back per unit")
    parser.add_argument("--address", help="a running Ray cluster (default: a one-node Ray on this machine)")
    args = parser.parse_args()

    import ray

    from codeagent.executors.ray_executor import RayExecutor

    print(f"{args.tasks} units, {args.slots} slots, {args.work}s of work and {args.log_kb} KiB of log per unit")
    rows = []
    local_wall = timed_batch(LocalExecutor(args.slots), args.tasks, args.work, args.log_kb)
    rows.append(("local processes", local_wall))
    started = time.perf_counter()
    executor = RayExecutor(args.address, slots=args.slots)
    executor.connect()
    ray_start = time.perf_counter() - started
    timed_batch(executor, min(args.tasks, 4 * args.slots), 0.0, 1)  # Ray starts its worker processes
    rows.append(("ray", timed_batch(executor, args.tasks, args.work, args.log_kb)))
    slots = ray.cluster_resources().get("codeagent_sandbox", args.slots) if args.address else args.slots
    print(f"ray start (once per batch): {ray_start:.2f}s")
    print(f"{'executor':<18}{'wall s':>9}{'tasks/s':>10}{'overhead/task s':>18}")
    for name, wall in rows:
        width = args.slots if name != "ray" else slots
        print(f"{name:<18}{wall:>9.2f}{args.tasks / wall:>10.1f}{wall * width / args.tasks - args.work:>18.4f}")
    ray_overhead = rows[1][1] * slots / args.tasks - args.work
    local_overhead = rows[0][1] * args.slots / args.tasks - args.work
    print(f"ray / local wall: {rows[1][1] / rows[0][1]:.2f}x; ray overhead per task {ray_overhead:.4f}s "
          f"({'under' if ray_overhead < 0.5 else 'OVER'} the 0.5s target), local {local_overhead:.4f}s")
    ray.shutdown()


if __name__ == "__main__":
    main()
