"""Mining throughput in tasks per hour per core: `--workers` and the environment cache, side by side in
one run on one history.

The history: K fix commits of a small Python package (each fixes a function and adds its test), made
fresh with a marker of this run so that its instance images are new. Runs, each into a fresh output:

    cold, 1 worker   the instance layers built (the generic Python environment below them is cached once
                     any mined Python task ran on this engine: said in the output)
    warm, 1 worker   the same history again: every layer cached
    warm, 2 workers  the same, two candidates validated at once

Each prints kept tasks, wall seconds, tasks/hour and tasks/hour/core (the machine's cores: os.cpu_count()),
and the ratios against `cold, 1 worker` and `warm, 1 worker`. Several runs (--repeat) give medians.

    python bench/mine_throughput.py [--commits 4] [--repeat 1] [--reruns 3]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402

from codeagent.mine.mining import Options, mine, open_repository  # noqa: E402
from codeagent.mine.progress import MiningProgress  # noqa: E402


def history(root: Path, commits: int, marker: str) -> Path:
    repo = root / "calc"
    repo.mkdir(parents=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b"}

    def commit(message: str, files: dict[str, str]) -> None:
        for name, text in files.items():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(text)
        for args in (["add", "-A"], ["commit", "-qm", message]):
            subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    wrong = "".join(f"def f{n}(a):\n    return a - {n}\n\n\n" for n in range(commits))
    commit("start", {"calc.py": f"# {marker}\n{wrong}", "tests/test_calc.py": "import calc\n", "conftest.py": ""})
    source, tests = wrong, "import calc\n"
    for n in range(commits):
        source = source.replace(f"return a - {n}\n", f"return a + {n}\n")
        tests += f"\n\ndef test_f{n}():\n    assert calc.f{n}(1) == {1 + n}\n"
        commit(f"f{n}() adds {n} to its argument: f{n}(1) is {1 + n}", {"calc.py": f"# {marker}\n{source}",
                                                                     "tests/test_calc.py": tests})
    return repo


def run(repo: Path, workers: int, reruns: int, out: Path) -> tuple[int, float, int]:
    options = Options(workers=workers, reruns=reruns)
    started = time.monotonic()
    with MiningProgress(Console(file=io.StringIO())) as progress:
        summary = mine(open_repository(str(repo), "bench/calc"), out, options, progress)
    return summary.kept, time.monotonic() - started, summary.candidates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--reruns", type=int, default=3)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0]
    print(f"{args.commits} fix commits, reruns {args.reruns}, {cores} cores, load {load:.1f} at the start")
    rates: dict[str, list[float]] = {}
    for repeat in range(args.repeat):
        root = Path(tempfile.mkdtemp(prefix="codeagent-mine-bench-"))
        repo = history(root, args.commits, uuid.uuid4().hex)
        for name, workers in (("cold, 1 worker", 1), ("warm, 1 worker", 1), ("warm, 2 workers", 2)):
            kept, seconds, candidates = run(repo, workers, args.reruns, root / name.replace(", ", "-").replace(" ", "") / "t.jsonl")
            per_hour = kept / (seconds / 3600)
            rates.setdefault(name, []).append(per_hour)
            print(f"[{repeat + 1}] {name:16} {kept}/{candidates} kept in {seconds:6.1f}s: {per_hour:6.1f} tasks/hour, "
                  f"{per_hour / cores:6.1f} tasks/hour/core", flush=True)
    medians = {name: statistics.median(values) for name, values in rates.items()}
    print("\nmedians (tasks/hour/core) and ratios:")
    for name, value in medians.items():
        print(f"  {name:16} {value / cores:6.1f}   x{value / medians['cold, 1 worker']:.2f} vs cold 1 worker,"
              f" x{value / medians['warm, 1 worker']:.2f} vs warm 1 worker")
    print(f"load {os.getloadavg()[0]:.1f} at the end (the machine is shared: other work runs beside)")


if __name__ == "__main__":
    main()
