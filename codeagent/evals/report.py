"""What `eval grade|run` prints and writes when a batch ends: summary.json, the table, the tally, the
errors and environment defects, and the exit status."""

from __future__ import annotations

import sys
from pathlib import Path


def environment_defects(reports: list[dict], *, gold: bool, empty: bool) -> dict[str, str]:
    """{instance: why} for the instances that break the check a --gold or --empty run makes:
    gold must resolve, the empty patch must not. Either failure is the environment's, not a verdict."""
    defects = {}
    for report in reports:
        outcome = report.get("outcome", "?")
        reason = (report.get("reason") or "").strip().splitlines()
        detail = f"{outcome}" + (f": {reason[0]}" if reason else "")
        if report.get("repository_unavailable"):  # not judged: an error (its reason says --repos), no defect
            continue
        if gold and not report.get("resolved"):
            defects[report["instance_id"]] = f"gold does not resolve ({detail})"
        elif empty and report.get("resolved"):
            defects[report["instance_id"]] = "the empty patch resolves (the tests do not test the fix)"
    return defects


def finish(reports: list[dict], out: Path, extra: dict, defects: dict[str, str] | None = None) -> None:
    """Summary, table; exit status 1 when any instance errored (it is counted, never dropped) or
    when a --gold/--empty check found environment defects (`defects`)."""
    from rich.table import Table

    from ..visible import visible
    from .batch import summarize
    from .progress import stderr_console
    from .runner import write_json_atomic

    summary = summarize(reports, extra)
    write_json_atomic(out / "summary.json", summary)
    table = Table(title=f"{summary['resolved']}/{summary['instances']} resolved ({summary['resolved_percent']}%)")
    for column in ("repository", "resolved", "errors", "total"):
        table.add_column(column)
    for repo, row in summary["per_repo"].items():
        table.add_row(repo, str(row["resolved"]), str(row["errors"]), str(row["total"]))
    stderr_console().print(table)
    stderr_console().print(tally(summary), markup=False, highlight=False)
    if summary.get("touches_test_infrastructure"):
        stderr_console().print(visible(f"patches touching test infrastructure (scored 0 as rewards): "
                                 f"{', '.join(summary['touches_test_infrastructure'])}"), markup=False, highlight=False)
    if summary.get("tamper_evidence"):
        stderr_console().print(visible(f"test logs that do not match the run codeagent's judge saw (unresolved, "
                                 f"scored 0): {', '.join(summary['tamper_evidence'])}"), markup=False, highlight=False)
    if "scaling" in summary:
        scaling = summary["scaling"]
        stderr_console().print(f"Pass@1 {scaling['pass_at_1']:.2%} · Pass@N {scaling['pass_at_n']}/{summary['instances']} · "
                         "Best@N " + ", ".join(f"{p} {n}" for p, n in scaling["best_at_n"].items()))
    stderr_console().print(f"reports: {out}/instances/*/report.json · summary: {out}/summary.json")
    if summary["errors"]:
        failed = {r["instance_id"]: r.get("reason", "") for r in reports if r["instance_id"] in summary["error_instances"]}
        for instance_id, reason in list(failed.items())[:10]:  # the reason may quote the model's patch
            line = visible(f"error: {instance_id}: {reason.splitlines()[0] if reason else '?'}")
            stderr_console().print(line, markup=False, highlight=False, soft_wrap=True)
        stderr_console().print(f"{summary['errors']} of {summary['instances']} instance(s) errored (run the same "
                         "command again to retry them)")
    for instance_id, why in (defects or {}).items():
        stderr_console().print(visible(f"environment defect: {instance_id}: {why}"), markup=False, highlight=False)
    if defects:
        stderr_console().print(f"{len(defects)} of {summary['instances']} instance(s) show an environment defect: "
                         "their verdicts cannot be trusted until the environment is fixed", markup=False)
    if summary["errors"] or defects:
        sys.exit(1)


def tally(summary: dict) -> str:
    """`resolved 1 · unresolved 2 · errors 0`, then how the unresolved and errored ones ended."""
    unresolved = summary["instances"] - summary["resolved"] - summary["errors"]
    line = f"resolved {summary['resolved']} · unresolved {unresolved} · errors {summary['errors']}"
    others = {outcome: count for outcome, count in summary["outcomes"].items() if outcome not in ("resolved", "unresolved")}
    if others:
        line += " (" + ", ".join(f"{outcome.replace('_', ' ')} {count}" for outcome, count in sorted(others.items())) + ")"
    return line
