"""Gold and empty patches for a whole repository: does the environment judge right?

For every selected instance, grades the gold patch (it must resolve) and the empty patch (it must
not), then prints one row per instance: gold, empty, the Python used (requested -> used when it
fell back), and when gold fails, the cause as far as the report tells it (outcome, first reason
line, the first failing tests). An instance listed in evals/fidelity/label_defects.yaml (test lists that
cannot tell a fix from no fix) carries that note. Resumable: reports are kept under OUTPUT/gold and OUTPUT/empty and
graded instances are not graded again. `--table-only` prints the table from reports already there.

Usage: python bench/gold_empty.py --dataset lite --repo sphinx-doc/sphinx --repos DIR
           [--instances ID,ID] [--output DIR] [--workers 1] [--skip-empty] [--table-only]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from codeagent.evals.batch import grade_batch
from codeagent.evals.tasks import eval_tasks as _tasks
from codeagent.executors.local import LocalExecutor

LABEL_DEFECTS = Path(__file__).resolve().parent.parent / "evals" / "fidelity" / "label_defects.yaml"


def label_defects() -> dict[str, str]:
    import yaml

    return yaml.safe_load(LABEL_DEFECTS.read_text())["instances"] if LABEL_DEFECTS.is_file() else {}


def verdict(report: dict | None) -> str:
    if report is None:
        return "not run"
    return "resolved" if report.get("resolved") else report.get("outcome", "?")


def python_used(report: dict | None) -> str:
    if not report:
        return "-"
    used, wanted = report.get("python_used", "?"), report.get("python_requested", "?")
    return used if used == wanted else f"{wanted} -> {used} (fallback)"


def gold_cause(report: dict | None) -> str:
    if not report or report.get("resolved"):
        return ""
    parts = [report.get("outcome", "?")]
    reason = (report.get("reason") or "").strip().splitlines()
    if reason:
        parts.append(reason[0][:120])
    failing = [*report.get("f2p_failed", []), *report.get("p2p_failed", [])]
    if failing:
        more = f" (+{len(failing) - 3} more)" if len(failing) > 3 else ""
        parts.append("failing: " + ", ".join(failing[:3]) + more)
    return "; ".join(parts)


def read_report(folder: Path, instance_id: str) -> dict | None:
    path = folder / "instances" / instance_id / "report.json"
    return json.loads(path.read_text()) if path.is_file() else None


def table(ids: list[str], versions: dict[str, str], out: Path) -> list[str]:
    lines = ["| instance | version | gold | empty | python | cause when gold fails / note |",
             "|---|---|---|---|---|---|"]
    known = label_defects()
    for instance_id in ids:
        gold, empty = read_report(out / "gold", instance_id), read_report(out / "empty", instance_id)
        cause = gold_cause(gold)
        if instance_id in known:
            cause = "; ".join(filter(None, [cause, "dataset label defect: " + known[instance_id]]))
        lines.append(f"| {instance_id} | {versions[instance_id]} | {verdict(gold)} | {verdict(empty)} | "
                     f"{python_used(gold or empty)} | {cause.replace('|', '/')} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="lite")
    parser.add_argument("--repo", help="owner/name; every instance of it")
    parser.add_argument("--instances", help="comma-separated instance ids")
    parser.add_argument("--repos", help="local mirrors: DIR/owner/name")
    parser.add_argument("--output", default="codeagent-eval/gold-empty")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--skip-empty", action="store_true", help="grade gold only")
    parser.add_argument("--table-only", action="store_true", help="print the table from reports already there")
    args = parser.parse_args()

    tasks = _tasks(args.dataset, args.instances, None, args.repo, None, args.repos)
    out = Path(args.output)
    if not args.table_only:
        gold = {task.instance_id: task.gold_patch or "" for task in tasks}
        grade_batch(tasks, gold, out / "gold", model_name="gold", executor=LocalExecutor(args.workers))
        if not args.skip_empty:
            grade_batch(tasks, {task.instance_id: "" for task in tasks}, out / "empty", model_name="empty",
                        executor=LocalExecutor(args.workers))
    ids = [task.instance_id for task in tasks]
    lines = table(ids, {task.instance_id: task.version or "?" for task in tasks}, out)
    print("\n".join(lines))
    gold_ok = sum(bool((read_report(out / "gold", i) or {}).get("resolved")) for i in ids)
    empty_ok = sum(read_report(out / "empty", i) is not None and not read_report(out / "empty", i).get("resolved")
                   for i in ids)
    print(f"\ngold resolves {gold_ok}/{len(ids)}; empty unresolved {empty_ok}/{len(ids)}")


if __name__ == "__main__":
    main()
