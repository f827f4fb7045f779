"""What the test-run judge costs a graded instance (issue 34): the same gold patch graded with this checkout's
harness (the judge watching) and with a baseline checkout's (`--baseline`, e.g. a worktree at 0972c8d, before
the judge), alternating, several rounds, in the same run (without `--baseline`: this checkout with the judge
switched off in the grading process: no observer installed, the same images, so that only the judge differs); the medians of the grading container's seconds
(start to stop) and of the test command's, per language, and their ratio.

    python bench/judge_overhead.py --rounds 5
    python bench/judge_overhead.py --dataset evals/multilingual/instances.jsonl --repos REPOS \\
        --instances gin-gonic__gin-4003,dtolnay__semver-296,axios__axios-5085,google__gson-2311,fmtlib__fmt-3729
    git worktree add /tmp/base 0972c8d && python bench/judge_overhead.py --baseline /tmp/base   # the old code

Without --dataset it grades the language tasks of tests/data/language_tasks (one per toolchain: Go, Rust,
Node, Maven, C; small repositories, so the judge's fixed cost shows most). The images are built (or found)
once before the measured rounds; a `--baseline` checkout with other image recipes builds its own in its
first round (give it one more round then). Results: bench/results/judge_overhead.json (`--output`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GRADE = """
import json, sys
from codeagent.task import Task
from codeagent.harness.env_grade import grade_patch
row, repo = json.loads(sys.argv[1]), sys.argv[2]
if sys.argv[3] == "off":  # the judge switched off: a Watch with no observer installs and collects nothing
    from codeagent.harness.grading import judge

    def unwatched(self, box, parent, command, log_parser, test_files=()):
        self.context, self.observers = judge.Context(box, parent, command, log_parser, list(test_files)), []

    judge.Watch.__init__ = unwatched
report = grade_patch(Task.from_swebench(row, repo=repo), row["patch"])
print(json.dumps({"outcome": report.get("outcome"), "seconds": report.get("seconds"),
                  "tests": (report.get("phase_seconds") or {}).get("tests"), "guard": report.get("guard", ""),
                  "tamper_evidence": report.get("tamper_evidence", [])}))
"""


def toy_tasks(root: Path) -> list[tuple[dict, str]]:
    from tests.support.language_tasks import LANGUAGES, make_base

    found = []
    for lang in LANGUAGES:
        row, commit = make_base(lang, root / "repos")
        found.append(({**row, "base_commit": commit}, str(root / "repos" / row["repo"])))
    return found


def dataset_tasks(dataset: Path, repos: Path, instances: list[str]) -> list[tuple[dict, str]]:
    rows = [json.loads(line) for line in dataset.read_text().splitlines() if line.strip()]
    chosen = [row for row in rows if not instances or row["instance_id"] in instances]
    return [(row, str(repos / row["repo"])) for row in chosen]


def grade(code: Path, row: dict, repo: str, judge: str = "on") -> dict:
    env = {**os.environ, "PYTHONPATH": str(code)}
    proc = subprocess.run([sys.executable, "-c", GRADE, json.dumps(row), repo, judge], cwd=code, env=env,
                          capture_output=True, text=True, timeout=7200, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"grading {row['instance_id']} with {code} failed: {proc.stderr[-2000:]}")
    return json.loads(lines[-1])


def median(values: list[float]) -> float:
    return round(statistics.median(values), 3) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path,
                        help="a checkout of the code before the judge (default: this one with the judge off)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dataset", type=Path)
    parser.add_argument("--repos", type=Path)
    parser.add_argument("--instances", default="")
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results" / "judge_overhead.json")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="judge-overhead-"))
    try:
        if args.dataset:
            tasks = dataset_tasks(args.dataset, args.repos, [i for i in args.instances.split(",") if i])
        else:
            tasks = toy_tasks(scratch)
        results = []
        for row, repo in tasks:
            sides: dict[str, list[dict]] = {"judge": [], "baseline": []}
            grade(ROOT, row, repo)  # images built (or found) before any measured round
            for number in range(args.rounds):
                order = ("judge", "baseline") if number % 2 == 0 else ("baseline", "judge")
                for side in order:
                    if side == "judge":
                        sides[side].append(grade(ROOT, row, repo))
                    else:
                        sides[side].append(grade(args.baseline or ROOT, row, repo, "on" if args.baseline else "off"))
            entry = {"instance": row["instance_id"], "language": (row.get("environment") or {}).get("language", "python"),
                     "rounds": args.rounds, "baseline": str(args.baseline or "this checkout, judge off"),
                     "outcomes": {side: sorted({run["outcome"] for run in runs}) for side, runs in sides.items()},
                     "guard": sorted({run["guard"] for run in sides["judge"]}),
                     "tamper_evidence": [run["tamper_evidence"] for run in sides["judge"] if run["tamper_evidence"]]}
            for measure in ("seconds", "tests"):
                judge = median([run[measure] for run in sides["judge"] if run[measure] is not None])
                base = median([run[measure] for run in sides["baseline"] if run[measure] is not None])
                entry[measure] = {"judge": judge, "baseline": base, "ratio": round(judge / base, 3) if base else None}
            results.append(entry)
            print(f"{entry['instance']:40} {entry['language']:8} container {entry['seconds']['baseline']:7.2f}s -> "
                  f"{entry['seconds']['judge']:7.2f}s ({entry['seconds']['ratio']}x)  tests {entry['tests']['baseline']:7.2f}s"
                  f" -> {entry['tests']['judge']:7.2f}s ({entry['tests']['ratio']}x)  {entry['outcomes']}", flush=True)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({"measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                           "load": os.getloadavg(), "results": results}, indent=1) + "\n")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
