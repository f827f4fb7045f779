"""Command round trip: codeagent's persistent shell vs one `docker exec` per command (as mini-swe-agent runs
tools), for this tree and a baseline checkout side by side.

Each run starts one child process per tree (its own code, its own sandbox) and alternates their order; in a
child, the same commands go through the shell and through `docker exec` on the same container, interleaved.
Then the host side alone (no container: steady on a loaded machine): 1 MB parsed from a scripted stream in
reads of 1 MiB, 64 KiB and 16 KiB, plus the sandbox's checks of the result.
Target: the shell's p50 at least 20x faster than docker exec for 1 MB of output.
Usage: python bench/sandbox_roundtrip.py [--runs 3] [--n 60] [--baseline /path/to/other/checkout | --no-baseline]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

COMMANDS = {
    "true": "true",
    # 1 MB from the shell's own printf: no process is started, so this is the transport's cost
    "1 MB output (builtin)": "printf '%1048576s' x",
    "1 MB output": "head -c 1048576 /dev/zero | tr '\\0' x",
    # the same command with its output discarded: the floor that no transport can go under
    "1 MB to /dev/null": "head -c 1048576 /dev/zero | tr '\\0' x >/dev/null",
}
METHODS = ("codeagent shell", "docker exec (SDK)", "docker exec (CLI)")


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cpu_timed(fn, cpu: list[float]) -> float:
    """Wall seconds of fn; this process's CPU seconds for it go to `cpu` (the host side of the transport)."""
    started = time.process_time()
    wall = timed(fn)
    cpu.append(time.process_time() - started)
    return wall


def measure(n: int) -> dict:
    """In a child: p50 seconds of each command by each method, on one sandbox of this process's codeagent."""
    from _common import scratch_repo

    from codeagent.sandbox import open_sandbox

    repo = scratch_repo(20)
    medians: dict = {}
    try:
        with open_sandbox(repo) as box:
            container = box.container
            for label, command in COMMANDS.items():
                times: dict[str, list[float]] = {name: [] for name in METHODS}
                cpu: list[float] = []
                box.run(command)  # warm
                for _ in range(n):
                    times["codeagent shell"].append(cpu_timed(lambda command=command: box.run(command), cpu))
                    times["docker exec (SDK)"].append(timed(lambda command=command: container.exec_run(["sh", "-c", command])))
                    times["docker exec (CLI)"].append(timed(lambda command=command: subprocess.run(
                        ["docker", "exec", container.id, "sh", "-c", command], capture_output=True)))
                medians[label] = {name: statistics.median(values) for name, values in times.items()}
                medians[label]["shell cpu"] = statistics.median(cpu)
            medians["io"] = box.io_mode
    finally:
        shutil.rmtree(repo, ignore_errors=True)
    return medians


def host_side(n: int) -> dict:
    """In a child: seconds of this process's work for 1 MB (printf's spaces, or a test log) in reads of a size,
    with no container: the shell's parsing from a scripted stream, then the Docker sandbox's checks of the
    result (runaways, the disk cap). The container's side is the same for every tree; this part is ours."""
    import tempfile

    from codeagent.sandbox import disk
    from codeagent.sandbox.docker_recovery import DockerRecovery
    from codeagent.sandbox.held import HostView
    from codeagent.sandbox.protocol import Limits
    from codeagent.sandbox.shell import ShellSession

    class Scripted:
        def __init__(self, stream: bytes, size: int):
            self.stream, self.size, self.at = stream, size, 0

        def send(self, data: bytes) -> None:
            pass

        def recv(self, timeout: float) -> bytes:
            chunk = self.stream[self.at:self.at + self.size]
            self.at += self.size
            return chunk

    procs = Path(tempfile.mkdtemp()) / "cgroup.procs"
    procs.write_text("1\n7\n9\n")  # a cgroup's member list, as HostView reads it

    class Watch:
        tripped = False
        view = HostView(procs, [])

    class Box(DockerRecovery):
        limits = Limits()
        _disk = Watch()  # type: ignore[assignment]

        def _processes(self) -> int:
            return 3

    box = Box()
    shell = ShellSession(lambda: None, state_dir="/tmp/s", workdir="/", kill_children=lambda *a: True,
                         hard_reset=lambda: None)
    if hasattr(shell, "watch"):  # as DockerSandbox sets it
        shell.watch = (disk.FILE_SIZE_EXCEEDED,)
    log = b"FAILED tests/test_io.py::test_read[case-17] - AssertionError: assert 'No such file' == 'ok'\n"
    outputs = {"spaces": b" " * 1048575 + b"x", "test log": (log * (1048576 // len(log) + 1))[:1048576]}
    seconds = {}
    for (kind, body), size in [(("spaces", outputs["spaces"]), 1 << 20), *((item, 1 << 16) for item in outputs.items()),
                               (("spaces", outputs["spaces"]), 1 << 14)]:
        stream = body + shell._marker + b" 0 /testbed\n"
        times = []
        for _ in range(n * 3):
            shell._transport = Scripted(stream, size)  # type: ignore[assignment]
            started = time.perf_counter()
            result = shell._execute("printf", None)
            box._recover_from_runaways(result)
            box._enforce_disk_cap(result, False)
            times.append(time.perf_counter() - started)
        seconds[f"{kind}, {size // 1024} KiB reads"] = statistics.median(times)
    return seconds


def run_child(tree: Path, n: int, mode: str = "--child") -> dict:
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{HERE / 'bench'}"}
    done = subprocess.run([sys.executable, __file__, mode, "--n", str(n)], capture_output=True, text=True,
                          env=env, cwd=tree)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--n", type=int, default=60, help="commands per run and method")
    parser.add_argument("--baseline", type=Path, default=Path("/work/main"),
                        help="another codeagent checkout to compare with (its code is run as it is)")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--host-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child or args.host_child:
        print(json.dumps(measure(args.n) if args.child else host_side(args.n)))
        return
    trees = {"this tree": HERE} | ({} if args.no_baseline else {"baseline": args.baseline.resolve()})
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    for run in range(args.runs):
        for name, tree in (trees.items() if run % 2 == 0 else reversed(trees.items())):
            runs[name].append(run_child(tree, args.n))
    print(f"{args.runs} runs x {args.n} commands per method, trees alternating; load {os.getloadavg()[0]:.1f}")
    for name, tree in trees.items():
        print(f"  {name}: {tree} (transport: {runs[name][0]['io']})")
    for label in COMMANDS:
        print(f"[{label}] p50 per run (ms), median over runs")
        shell, cpu = {}, {}
        for name in trees:
            per_run = runs[name]
            shell[name] = statistics.median(r[label]["codeagent shell"] for r in per_run)
            cpu[name] = statistics.median(r[label]["shell cpu"] for r in per_run)
            ratios = [r[label]["docker exec (SDK)"] / r[label]["codeagent shell"] for r in per_run]
            cli = [r[label]["docker exec (CLI)"] / r[label]["codeagent shell"] for r in per_run]
            execs = statistics.median(r[label]["docker exec (SDK)"] for r in per_run)
            print(f"  {name:10s} shell {shell[name] * 1000:7.2f} (host CPU {cpu[name] * 1000:5.2f})   docker exec (SDK) {execs * 1000:7.2f}   "
                  f"ratio exec/shell {statistics.median(ratios):5.1f}x (CLI {statistics.median(cli):5.1f}x)   "
                  f"runs: {' '.join(f'{ratio:.1f}x' for ratio in ratios)}")
        if "baseline" in shell:
            print(f"  shell: baseline/this tree {shell['baseline'] / shell['this tree']:.2f}x wall, "
                  f"{cpu['baseline'] / cpu['this tree']:.2f}x host CPU")
    print("target: ratio exec/shell >= 20x for 1 MB of output (builtin)")
    host: dict[str, list[dict]] = {name: [] for name in trees}
    for run in range(args.runs):
        for name, tree in (trees.items() if run % 2 == 0 else reversed(trees.items())):
            host[name].append(run_child(tree, args.n, "--host-child"))
    print("[host side alone: 1 MB parsed from a scripted stream + the sandbox's checks] p50 (ms)")
    for reads in host["this tree"][0]:
        figures = {name: statistics.median(r[reads] for r in host[name]) for name in trees}
        line = "   ".join(f"{name} {value * 1000:6.3f}" for name, value in figures.items())
        ratio = f"   baseline/this tree {figures['baseline'] / figures['this tree']:.2f}x" if "baseline" in figures else ""
        print(f"  {reads:24s} {line}{ratio}")


if __name__ == "__main__":
    main()
