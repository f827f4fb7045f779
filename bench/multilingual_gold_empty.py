"""Gold and empty patches of the real multilingual instances, graded through `codeagent eval grade`.

For each language of the data set (an instance's `environment.language`; python for a row without one),
runs `codeagent eval grade --dataset FILE --instances IDS --repos DIR --gold` and then `--empty`
(each into OUTPUT/LANGUAGE/gold and OUTPUT/LANGUAGE/empty: resumable, as eval grade is), then writes the
table (language, instance, gold, empty, seconds of each, and the cause when gold does not resolve or
empty does) between the table markers of evals/multilingual/README.md, and prints it.

Gold must resolve and empty must not: every other row is an exception to diagnose.

Usage:
    python bench/multilingual_instances.py --mirrors MIRRORS --layout REPOS     # the --repos folder, once
    python bench/multilingual_gold_empty.py --repos REPOS [--dataset evals/multilingual/instances.jsonl]
           [--languages go,rust] [--instances ID,ID] [--output DIR] [--workers 1]
           [--dry-run] [--table-only] [--readme FILE | --no-readme]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from gold_empty import gold_cause, read_report, verdict

ROOT = Path(__file__).resolve().parent.parent
DATASET = ROOT / "evals" / "multilingual" / "instances.jsonl"
README = ROOT / "evals" / "multilingual" / "README.md"
START, END = "<!-- gold-empty table: start -->", "<!-- gold-empty table: end -->"
LANGUAGE_ORDER = ("go", "rust", "node", "java", "c/c++", "python")


def rows_by_language(dataset: Path, wanted: set[str] | None, languages: set[str] | None) -> dict[str, list[str]]:
    """{language: [instance id, ...]} in the file's order, languages in LANGUAGE_ORDER first."""
    groups: dict[str, list[str]] = {}
    for line in dataset.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        language = (row.get("environment") or {}).get("language", "python")
        if (wanted is None or row["instance_id"] in wanted) and (languages is None or language in languages):
            groups.setdefault(language, []).append(row["instance_id"])
    rank = {name: index for index, name in enumerate(LANGUAGE_ORDER)}
    return dict(sorted(groups.items(), key=lambda item: rank.get(item[0], len(rank))))


def slug(language: str) -> str:
    return language.replace("/", "")


def grade_command(dataset: Path, ids: list[str], repos: str, output: Path, which: str, workers: int) -> list[str]:
    return [sys.executable, "-m", "codeagent.cli", "eval", "grade", "--dataset", str(dataset),
            "--instances", ",".join(ids), "--repos", repos, "--output", str(output), f"--{which}",
            "--workers", str(workers)]


def grade(groups: dict[str, list[str]], args: argparse.Namespace) -> None:
    for language, ids in groups.items():
        for which in ("gold", "empty"):
            command = grade_command(args.dataset, ids, args.repos, args.output / slug(language) / which, which,
                                    args.workers)
            print("$ " + " ".join(command), file=sys.stderr, flush=True)
            if args.dry_run:
                continue
            started = time.monotonic()
            done = subprocess.run(command)
            print(f"[{language} {which}: exit {done.returncode}, {time.monotonic() - started:.0f} s]",
                  file=sys.stderr, flush=True)


def seconds(report: dict | None) -> str:
    value = (report or {}).get("total_seconds")
    return f"{value:.0f}" if isinstance(value, (int, float)) else "-"


def empty_cause(report: dict | None) -> str:
    if not report or report.get("outcome") == "unresolved":
        return ""
    if report.get("resolved"):
        return "empty resolves: its FAIL_TO_PASS pass without the fix"
    return "empty: " + gold_cause(report)


def table(groups: dict[str, list[str]], output: Path) -> list[str]:
    lines = ["| language | instance | gold | empty | gold s | empty s | cause when gold or empty is not as it must be |",
             "|---|---|---|---|---|---|---|"]
    totals = []
    for language, ids in groups.items():
        gold_ok = empty_ok = 0
        for instance_id in ids:
            gold = read_report(output / slug(language) / "gold", instance_id)
            empty = read_report(output / slug(language) / "empty", instance_id)
            gold_ok += bool(gold and gold.get("resolved"))
            empty_ok += bool(empty and empty.get("outcome") == "unresolved")  # an error proves nothing
            cause = "; ".join(filter(None, [gold_cause(gold), empty_cause(empty)])).replace("|", "/")
            lines.append(f"| {language} | {instance_id} | {verdict(gold)} | {verdict(empty)} | {seconds(gold)} | "
                         f"{seconds(empty)} | {cause} |")
        totals.append(f"{language}: gold resolves {gold_ok}/{len(ids)}, empty graded unresolved {empty_ok}/{len(ids)}")
    return [*lines, "", *(f"- {line}" for line in totals)]


def write_readme(path: Path, lines: list[str]) -> None:
    text = path.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{path}: no table markers ({START} ... {END}) to write between")
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    path.write_text(head + START + "\n" + "\n".join(lines) + "\n" + END + tail)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", help="DIR/owner/name: each repository's git directory or clone")
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--languages", help="comma-separated: go, rust, node, java, c/c++ (default all)")
    parser.add_argument("--instances", help="comma-separated instance ids (default all)")
    parser.add_argument("--output", type=Path, default=Path("codeagent-eval/multilingual"))
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--dry-run", action="store_true", help="print the eval grade commands; run none")
    parser.add_argument("--table-only", action="store_true", help="the table from the reports already there")
    parser.add_argument("--readme", type=Path, default=README, help="the README whose table is rewritten")
    parser.add_argument("--no-readme", action="store_true", help="print the table only")
    args = parser.parse_args()

    groups = rows_by_language(args.dataset, set(args.instances.split(",")) if args.instances else None,
                              set(args.languages.split(",")) if args.languages else None)
    if not groups:
        raise SystemExit(f"{args.dataset}: no instance selected")
    if not args.table_only:
        if not args.repos:
            raise SystemExit("--repos DIR is needed to grade (make it with bench/multilingual_instances.py --layout)")
        grade(groups, args)
    lines = table(groups, args.output)
    print("\n".join(lines))
    if not (args.dry_run or args.no_readme):
        write_readme(args.readme, lines)


if __name__ == "__main__":
    main()
