"""Recall of official instances: which instances of a benchmark `codeagent tasks mine` finds in the
repository's history, and whether its FAIL_TO_PASS equals the official list.

Found: a unit of the history (a pull request, else a commit: codeagent/mine/walk.py) whose gold patch
changes the same non-test files as the official patch, from the same base commit. Then (--validate, Docker)
the unit is validated as the miner validates it (base runs, gold runs, grades) and its FAIL_TO_PASS is
compared with the official list. The statement checks are not applied here: recall is about the change
and its tests.

Official instances: SWE-bench Lite (a .json/.jsonl file; default the test and dev splits of
/work/shared/swebench when there) for Python repositories; for the SWE-bench Multilingual repositories,
the rows this project rebuilt (evals/multilingual/instances.jsonl: base = the merge's first parent, FAIL_TO_PASS
measured with SWE-bench's own test commands).

    python bench/mine_recall.py --repo MIRROR=owner/name [--repo ...] [--validate] [--reruns 2]
        [--results bench/results/mine_recall.jsonl] [--only INSTANCE_ID]

One JSON line per instance goes to --results as each is done; a second run skips the instances already
there (kill it and start it again: nothing is redone). `--table` prints the markdown table of the results file.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codeagent import patches  # noqa: E402
from codeagent.mine.candidates import Skip, candidate, shallow_edges  # noqa: E402
from codeagent.mine.environment import task_for  # noqa: E402
from codeagent.mine.mining import Options, final_statement, open_repository  # noqa: E402
from codeagent.mine.output import row as mined_row  # noqa: E402
from codeagent.mine.split import DROPPED, kind_of  # noqa: E402
from codeagent.mine.statement import statement as statement_text  # noqa: E402
from codeagent.mine.validate import validate  # noqa: E402
from codeagent.mine.walk import history  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LITE = [Path("/work/shared/swebench/swe-bench-lite.test.json"), Path("/work/shared/swebench/swe-bench-lite.dev.jsonl")]
MULTILINGUAL = ROOT / "evals" / "multilingual" / "instances.jsonl"


def read_rows(path: Path) -> list[dict[str, Any]]:
    text = path.read_text()
    return json.loads(text) if path.suffix == ".json" else [json.loads(line) for line in text.splitlines() if line.strip()]


def official_rows(paths: list[Path]) -> list[dict[str, Any]]:
    rows = []
    for path in paths:
        if path.is_file():
            rows += read_rows(path)
    for item in rows:
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            if isinstance(item.get(key), str):
                item[key] = json.loads(item[key])
    return rows


def files_of(patch: str) -> list[str]:
    return sorted({diff.new or diff.old or "" for diff in patches.parse(patch)} - {""})


def code_files(patch: str) -> list[str]:
    """The files of an official patch the miner compares: all but docs and vendored code (SWE-bench Lite's
    patches hold none; SWE-bench Multilingual's keep README.md and the like, which a mined gold patch drops)."""
    return [path for path in files_of(patch) if kind_of(path) not in DROPPED]


def _merged_as(item: dict[str, Any]) -> str | None:
    match = re.search(r"merged as ([0-9a-f]{40})", str(item.get("source") or ""))
    return match.group(1) if match else None


def find(item: dict[str, Any], units: list, git_dir: Path, shallow: frozenset[str]) -> dict[str, Any]:
    """The unit that is this instance (or the closest one, and why it is not)."""
    number = item["instance_id"].rsplit("-", 1)[-1]
    wanted = code_files(item["patch"])
    merged = _merged_as(item)
    named = re.compile(rf"(?:#|pull request #){number}\b")
    pool = [unit for unit in units if unit.parent == item["base_commit"] or unit.sha == merged
            or named.search(unit.message.split("\n", 1)[0])]
    # the unit that names the pull request first: another one may share its base and its files
    pool.sort(key=lambda unit: not (unit.sha == merged or named.search(unit.message.split("\n", 1)[0])))
    tried = []
    for unit in pool:
        try:
            found = candidate(git_dir, unit, shallow=shallow)
        except Skip as why:
            tried.append({"unit": unit.sha[:12], "kind": unit.kind, "skip": str(why)})
            continue
        same_files, same_base = sorted(found.source_files) == wanted, found.commit.parent == item["base_commit"]
        tried.append({"unit": unit.sha[:12], "kind": unit.kind, "files": found.source_files, "same_files": same_files,
                      "same_base": same_base})
        if same_files and (same_base or unit.sha == merged or named.search(unit.message.split("\n", 1)[0])):
            # a rebuilt row's base is its merge's first parent by construction (not SWE-bench's): there, the
            # same merged pull request is the same instance
            found_it = same_base or (merged is not None and unit.sha == merged)
            return {"found": found_it, "same_files": True, "same_base": same_base, "same_unit": unit.sha == merged,
                    "unit": unit, "candidate": found, "tried": tried}
    return {"found": False, "same_files": False, "same_base": False, "unit": None, "candidate": None, "tried": tried}


def bench_repo(path: str, name: str, official: list[dict[str, Any]], args, done: set[str]) -> None:
    repo = open_repository(path, name)
    started = time.monotonic()
    units = history(repo.git_dir, owner=name.split("/")[0])
    shallow = frozenset(shallow_edges(repo.git_dir))
    print(f"== {name}: {len(units)} units walked in {time.monotonic() - started:.0f}s", flush=True)
    for item in official:
        if item["repo"] != name or item["instance_id"] in done or (args.only and item["instance_id"] not in args.only):
            continue
        result = find(item, units, repo.git_dir, shallow)
        unit, found = result.pop("unit"), result.pop("candidate")
        out: dict[str, Any] = {"instance_id": item["instance_id"], "repo": name, **result,
                               "official_files": code_files(item["patch"]), "official_base": item["base_commit"],
                               "official_f2p": item["FAIL_TO_PASS"]}
        if unit is not None:
            out.update({"unit": unit.sha, "unit_kind": unit.kind, "base": found.commit.parent, "mined_files": found.source_files,
                        "dropped": found.dropped_files, "held": found.held_files})
        if unit is not None and args.validate:
            out.update(_validate(repo, unit, found, item, args))
        with open(args.results, "a") as handle:
            handle.write(json.dumps(out) + "\n")
        print(f"  {item['instance_id']}: found={out['found']} files={out['same_files']} base={out['same_base']} "
              + (f"f2p_equal={out.get('f2p_equal')} ({out.get('outcome')}, {out.get('seconds')}s)" if args.validate else ""),
              flush=True)


def _validate(repo, unit, found, item: dict[str, Any], args) -> dict[str, Any]:
    began = time.monotonic()
    try:
        task = task_for(repo, found)
        if found.held_patch:
            task = task.model_copy(update={"held": {"patch": found.held_patch, "files": found.held_files}})
        log_dir = Path(args.logs) / item["instance_id"] if args.logs else None
        validation = validate(task, reruns=args.reruns, log_dir=log_dir)
    except Skip as why:
        return {"outcome": "skipped", "why": str(why), "seconds": round(time.monotonic() - began)}
    wanted = set(item["FAIL_TO_PASS"])
    mined = set(validation.fail_to_pass)
    statement = {}
    task = task.model_copy(update={"problem_statement": statement_text(unit.message),
                                   "commit": unit.sha, "unit": unit.kind})
    try:  # the miner's statement check, with the history's text (no model here)
        text, made = final_statement(task, validation, Options())
        statement = {"statement": "passes", **made}
        if args.rows:
            kept = mined_row(task.model_copy(update={"problem_statement": text}), unit.sha, repo.source, validation, made)
            with open(Path(args.rows) / f"{repo.name.replace('/', '__')}.jsonl", "a") as handle:
                handle.write(json.dumps(kept) + "\n")
    except Skip as why:
        statement = {"statement": str(why)}
    return {"outcome": "kept", **statement, "seconds": round(time.monotonic() - began), "f2p": sorted(mined),
            **f2p_compared(mined, wanted),
            "official_f2p_in_mined_p2p": sorted({test_key(n) for n in wanted} & {test_key(n) for n in validation.pass_to_pass}),
            "p2p": len(validation.pass_to_pass), "held_added": validation.held_added,
            "validation": {key: value for key, value in asdict(validation).items() if key != "failures"},
            "environment": task.environment, "version": task.version}


def test_key(name: str) -> str:
    """A test id as both sides name it: SWE-bench's Java rows write `Class#method`, the JUnit reports this
    harness reads give `Class.method`."""
    return name.replace("#", ".")


def f2p_compared(mined: list[str] | set[str], wanted: list[str] | set[str]) -> dict[str, Any]:
    ours, theirs = {test_key(n) for n in mined}, {test_key(n) for n in wanted}
    return {"f2p_equal": ours == theirs, "f2p_missing": sorted(theirs - ours), "f2p_extra": sorted(ours - theirs)}


def table(results: Path) -> str:
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    latest = {row["instance_id"]: row for row in rows}
    lines = ["| instance | found (files, base) | unit | validated | F2P mined / official | F2P equal | statement |",
             "|---|---|---|---|---|---|---|"]
    for row in sorted(latest.values(), key=lambda r: (r["repo"], r["instance_id"])):
        found = "yes" if row["found"] else f"no ({'files' if row['same_files'] else 'no unit with its files'}"
        found += "" if row["found"] else (", other base)" if row["same_files"] else ")")
        unit = f"{row.get('unit_kind', '')} {str(row.get('unit') or '')[:10]}"
        validated = row.get("outcome", "-") + (f": {row['why'][:90]}" if row.get("why") else "")
        f2p = f"{len(row['f2p'])} / {len(row['official_f2p'])}" if "f2p" in row else "-"
        if "f2p" in row:  # rows written before the names were compared as both sides write them
            row.update(f2p_compared(row["f2p"], row["official_f2p"]))
        equal = {True: "yes", False: "no", None: "-"}[row.get("f2p_equal")]
        said = "passes" if row.get("statement") == "passes" else (row.get("statement") or "-")[:70]
        lines.append(f"| {row['instance_id']} | {found} | {unit} | {validated} | {f2p} | {equal} | {said} |")
    by_repo: dict[str, list] = {}
    for row in latest.values():
        by_repo.setdefault(row["repo"], []).append(row)
    lines += ["", "| repository | instances | found | validated | F2P equal |", "|---|---|---|---|---|"]
    for repo, items in sorted(by_repo.items()):
        kept = [row for row in items if row.get("outcome") == "kept"]
        lines.append(f"| {repo} | {len(items)} | {sum(row['found'] for row in items)} | {len(kept)} | "
                     f"{sum(bool(row.get('f2p_equal')) for row in kept)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", action="append", default=[], help="MIRROR=owner/name")
    parser.add_argument("--official", action="append", default=[], help="official rows (default: Lite and multilingual)")
    parser.add_argument("--results", default=str(ROOT / "bench" / "results" / "mine_recall.jsonl"))
    parser.add_argument("--logs", help="a folder for each validation's logs")
    parser.add_argument("--validate", action="store_true", help="validate each found unit (Docker)")
    parser.add_argument("--rows", help="a folder: each kept unit whose statement passes the check, as the miner's row")
    parser.add_argument("--reruns", type=int, default=2)
    parser.add_argument("--only", action="append", default=[], help="only these instance ids")
    parser.add_argument("--table", action="store_true", help="print the table of --results and stop")
    args = parser.parse_args()
    results = Path(args.results)
    if args.table:
        print(table(results))
        return
    official = official_rows([Path(p) for p in args.official] or [*LITE, MULTILINGUAL])
    done = {json.loads(line)["instance_id"] for line in results.read_text().splitlines() if line.strip()} \
        if results.is_file() else set()
    for item in args.repo:
        path, name = item.rsplit("=", 1)
        bench_repo(path, name, official, args, done)


if __name__ == "__main__":
    main()
