"""What `codeagent tasks mine` finds in real histories: the SWE-bench Lite repositories pallets/flask and
psf/requests (mirrors fetched under /work/.mirror, or any given with --repo PATH=owner/name).

For each repository it walks the first-parent history and prints: candidates per 1,000 commits (commits
that change source and tests), the skip reasons, tasks after the environment and statement checks; then
it validates (Docker) the candidates that match an official Lite instance (by base commit, or by the
changed lines of the official patch) and up to --validate others (of the matches' versions first), and prints per task: kept or why
not, wall time, layers built (cache hits), flaky tests dropped, and for a Lite match whether its
FAIL_TO_PASS equals the official list.

    python bench/mine_history.py [--lite FILE] [--commits N] [--validate K] [--output DIR]

--lite: the official instances (a SWE-bench .json/.jsonl file; default the copy of Lite codeagent ships).
--output: where the kept tasks are written (DIR/owner__name.jsonl).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codeagent import patches  # noqa: E402
from codeagent.data.swebench import load_rows  # noqa: E402
from codeagent.mine.candidates import Skip, candidate, shallow_edges  # noqa: E402
from codeagent.mine.mining import Options, open_repository, prepare  # noqa: E402
from codeagent.mine.output import row, write_jsonl  # noqa: E402
from codeagent.mine.split import DOCS, kind_of  # noqa: E402
from codeagent.mine.validate import validate  # noqa: E402
from codeagent.mine.walk import history  # noqa: E402

MIRRORS = {"pallets/flask": "/work/.mirror/pallets+flask/repo", "psf/requests": "/work/.mirror/psf+requests/repo"}


def changed_lines(patch: str) -> set[str]:
    """The changed lines of a patch's non-doc files, stripped: what two copies of one fix share."""
    return {line[0] + line[1:].strip() for diff in patches.parse(patch) if diff.new and kind_of(diff.new) != DOCS
            for hunk in diff.hunks for line in hunk.lines if line[:1] in "+-" and line[1:].strip()}


def match(official: dict, tasks: list) -> tuple[object, float] | None:
    """The mined task that is this official instance: the same base commit, else the one whose gold patch holds
    most of the official patch's changed lines (at least 80% of them)."""
    for task in tasks:
        if task.base_commit == official["base_commit"]:
            return task, 1.0
    wanted = changed_lines(official["patch"])
    best = max(((task, len(wanted & changed_lines(task.gold_patch or "")) / max(1, len(wanted))) for task in tasks),
               key=lambda pair: pair[1], default=None)
    return best if best is not None and best[1] >= 0.8 else None


def bench_repo(name: str, path: str, lite: list[dict], args) -> dict:
    repo = open_repository(path, name)
    started = time.monotonic()
    commits = history(repo.git_dir, max_commits=args.commits)
    shallow = frozenset(shallow_edges(repo.git_dir))
    reasons: Counter = Counter()
    split_ok, tasks, seen = 0, [], set()
    for commit in commits:
        try:
            candidate(repo.git_dir, commit, shallow=shallow)
            split_ok += 1
            tasks.append(prepare(repo, commit, Options(), shallow, None, seen))
        except Skip as why:
            reasons[str(why).split(":")[0]] += 1
    walk = time.monotonic() - started
    print(f"\n== {name}: {len(commits)} first-parent commits ({commits[-1].date[:10]} .. {commits[0].date[:10]}), "
          f"walked in {walk:.1f}s")
    print(f"candidates (source + tests): {split_ok} = {1000 * split_ok / len(commits):.0f} per 1,000 commits; "
          f"tasks after environment/statement checks: {len(tasks)}")
    print("skipped: " + ", ".join(f"{reason} {count}" for reason, count in reasons.most_common()))
    official = [item for item in lite if item["repo"] == name]
    matched = {}
    for item in official:
        found = match(item, tasks)
        print(f"  {item['instance_id']}: " + (f"found as {found[0].commit[:12]} (overlap {found[1]:.2f})"
                                                 if found else "not among the candidates"))
        if found:
            matched[found[0].instance_id] = item
    chosen = [task for task in tasks if task.instance_id in matched]
    # the others: of the Lite matches' versions first (their environments are built: cache hits), newest first
    versions = {task.version for task in chosen}
    others = [task for task in tasks if task.instance_id not in matched]
    chosen += sorted(others, key=lambda task: task.version not in versions)[:args.validate]
    results, kept_rows = [], []
    for task in chosen:
        began = time.monotonic()
        try:
            validation = validate(task, reruns=args.reruns)
        except Skip as why:
            results.append({"task": task.instance_id, "kept": False, "why": str(why),
                            "seconds": round(time.monotonic() - began, 1)})
            print(f"  {task.instance_id}: skipped: {why} ({time.monotonic() - began:.0f}s)", flush=True)
            continue
        seconds = time.monotonic() - began
        kept_rows.append(row(task, task.commit, repo.source, validation))
        result = {"task": task.instance_id, "kept": True, "seconds": round(seconds, 1), "f2p": len(validation.fail_to_pass),
                  "p2p": len(validation.pass_to_pass), "flaky": len(validation.flaky),
                  "layers_built": len(validation.layers_built)}
        if task.instance_id in matched:
            wanted = set(json.loads(item) if isinstance(item := matched[task.instance_id]["FAIL_TO_PASS"], str) else item)
            result["lite"] = matched[task.instance_id]["instance_id"]
            result["f2p_equal"] = set(validation.fail_to_pass) == wanted
            result["f2p_missing"] = sorted(wanted - set(validation.fail_to_pass))
            result["f2p_extra"] = sorted(set(validation.fail_to_pass) - wanted)
        results.append(result)
        print(f"  {task.instance_id}: kept, {result}", flush=True)
    if args.output and kept_rows:
        write_jsonl(Path(args.output) / f"{name.replace('/', '__')}.jsonl", kept_rows)
    kept = [item for item in results if item["kept"]]
    per_task = sum(item["seconds"] for item in results) / max(1, len(kept))
    print(f"validated: {len(kept)} kept of {len(results)} run; wall time per kept task {per_task:.0f}s "
          f"(all validation time / kept); cache hits (no layer built): "
          f"{sum(1 for item in kept if item['layers_built'] == 0)}/{len(kept)}; flaky tests dropped: "
          f"{sum(item['flaky'] for item in kept)}")
    return {"repo": name, "commits": len(commits), "candidates": split_ok, "tasks": len(tasks),
            "skipped": dict(reasons), "results": results, "walk_seconds": round(walk, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lite", default="lite", help="the official instances (a file, or a dataset name)")
    parser.add_argument("--commits", type=int, default=None, help="walk at most this many commits per repository")
    parser.add_argument("--validate", type=int, default=2, help="candidates validated besides the Lite matches")
    parser.add_argument("--reruns", type=int, default=3)
    parser.add_argument("--repo", action="append", default=[], help="PATH=owner/name (default: flask and requests)")
    parser.add_argument("--output", help="a folder for the kept tasks")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    repos = dict(reversed(item.split("=", 1)) for item in args.repo) if args.repo else MIRRORS
    lite = load_rows(args.lite)
    figures = [bench_repo(name, path, lite, args) for name, path in repos.items()]
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
