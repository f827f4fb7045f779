"""How far past the disk cap a sandbox gets on an engine without a quota (overlay2 on ext4): files deleted while
held open, written as fast as the page cache takes them, under a 64 MiB cap.

The same run, side by side, alternating: the interval alone (the measure every `interval`, as on 0972c8d:
`disk.PROBE_INTERVAL = None`), and the free-space probe (every 50 ms, then freeze, measure, kill while frozen).
The writer in the sandbox opens a file, deletes it, writes 16 MiB into it and keeps it open, over and over (up
to 2 GiB), printing each MiB it has written; the overshoot is what it wrote before it was stopped, less the cap.
`--load N` runs N busy processes on the host meanwhile.
Usage: python bench/disk_overshoot.py [--runs 4] [--load 0] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CAP = 64 * 2**20
WRITER = r"""python3 - <<'EOF'
import os, sys
held, chunk = [], b"x" * 2**20
for n in range(128):
    fd = os.open(f"held{n}", os.O_CREAT | os.O_WRONLY, 0o600)
    os.unlink(f"held{n}")
    for m in range(16):
        os.write(fd, chunk)
        print(f"wrote {n * 16 + m + 1} MiB", flush=True)
    held.append(fd)
print("finished", flush=True)
EOF"""


def busy(stop) -> None:
    while not stop.is_set():
        pass


def trial(probe: bool) -> dict:
    from bench._common import scratch_repo
    from codeagent.sandbox import disk, open_sandbox
    from codeagent.sandbox.protocol import Limits

    disk.PROBE_INTERVAL = 0.05 if probe else None
    repo = scratch_repo(5)
    with open_sandbox(str(repo), limits=Limits(disk="64m")) as box:
        assert box._disk is not None, "this engine has a quota: nothing to measure"
        assert (box._disk.space is not None) == probe, "the probe needs this host's view of the engine"
        started = time.monotonic()
        result = box.run(WRITER, timeout=120)
        seconds = time.monotonic() - started
        written = max([int(n) for n in re.findall(r"wrote (\d+) MiB", result.output)] or [0]) * 2**20
        stopped = "Disk cap reached" in result.output and "finished" not in result.output
    return {"probe": probe, "written": written, "overshoot": max(0, written - CAP), "stopped": stopped,
            "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--load", type=int, default=0, help="busy processes on the host during the trials")
    parser.add_argument("--json")
    args = parser.parse_args()
    stop = multiprocessing.Event()
    workers = [multiprocessing.Process(target=busy, args=(stop,), daemon=True) for _ in range(args.load)]
    for worker in workers:
        worker.start()
    trials = []
    try:
        for run in range(args.runs):
            for probe in ((False, True) if run % 2 == 0 else (True, False)):
                trials.append(trial(probe))
                print(json.dumps(trials[-1]), flush=True)
    finally:
        stop.set()
        for worker in workers:
            worker.join(5)
    print(f"\ncap 64 MiB, load +{args.load} busy processes, {args.runs} runs each (MiB written past the cap)")
    medians = {}
    for probe, name in ((False, "interval only (0972c8d)"), (True, "free-space probe")):
        over = [t["overshoot"] / 2**20 for t in trials if t["probe"] == probe]
        medians[probe] = statistics.median(over)
        stopped = sum(t["stopped"] for t in trials if t["probe"] == probe)
        print(f"{name:26s} median {medians[probe]:7.0f}  max {max(over):7.0f}  min {min(over):7.0f}  "
              f"stopped {stopped}/{len(over)}  all {sorted(round(x) for x in over)}")
    if medians[True]:
        print(f"ratio (interval only / probe, medians): {medians[False] / medians[True]:.1f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"load": args.load, "trials": trials}, indent=1))


if __name__ == "__main__":
    main()
