"""Real repositories at the first try (issue 36): does `codeagent sandbox run --repo R` (no command: the
repository's own tests) run them offline, executed and parsed, on a machine that never built R's layers?
And how long does a cached start take, against a Python repository's?

The repositories (bench/env_repos.yaml, by ecosystem) are fetched beforehand into /work/.mirror/owner+name
(the `fetch` tool's layout) or --mirrors DIR; the bench never clones. For each, at its mirror's HEAD:

- first try: `codeagent sandbox run --repo MIRROR --timeout T` as a user types it (an empty user config):
  the wall time (the layers this repository needs that no earlier one built: its dependencies, its build;
  a toolchain layer is shared by every repository of its toolchain and version), the environment line,
  the warnings, the tests the parser found by status. It counts as a success when tests were executed and
  parsed (some may fail: a repository's own failures, or a test that needs the network).
- cached start: `codeagent sandbox run --repo MIRROR -- true`, the median of --runs, taken in turns with
  the same command on the Python repository (bench/env_repos.yaml's `python`), the ratio of the medians.

Resumable: one JSON line per repository in bench/results/env_repos.jsonl; a repository already there is
skipped (--again: run it anyway). Each run's whole output goes to --logs (not committed: it is the
repositories' output). `--table` prints the Markdown table of the results file.

Usage: python bench/env_repos.py [--only npm,pnpm] [--repos owner/name,...] [--runs 3] [--timeout 1500] [--table]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
LIST = Path(__file__).with_name("env_repos.yaml")
RESULTS = ROOT / "bench" / "results" / "env_repos.jsonl"
MIRRORS = Path("/work/.mirror")
COUNTED = re.compile(r"^tests: (.*) \(read as (\S+)\)$", re.M)
BUILT = re.compile(r"^building the (.+?) layer ", re.M)
# the mirror lacks a file of the commit (a snapshot may leave its largest blobs out): nothing was measured
INCOMPLETE = re.compile(r"^error: git archive of .* failed: error: invalid object ", re.M)


def mirror_of(repo: str, mirrors: Path) -> Path | None:
    folder = mirrors / repo.replace("/", "+")
    for candidate in (folder / "repo", folder):
        if (candidate / "HEAD").exists() or (candidate / ".git").exists():
            return candidate
    return None


def cli(args: list[str], timeout: float, env: dict[str, str]) -> tuple[int, str, str, float]:
    started = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "codeagent.cli", *args], capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=tempfile.gettempdir())
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as expired:
        code = 124
        out = (expired.stdout or b"").decode(errors="replace") if isinstance(expired.stdout, bytes) else expired.stdout or ""
        err = ((expired.stderr or b"").decode(errors="replace") if isinstance(expired.stderr, bytes)
               else expired.stderr or "") + f"\n[bench: killed after {timeout:g}s]"
    return code, out, err, time.perf_counter() - started


def statuses(stderr: str) -> tuple[dict[str, int], str]:
    found = COUNTED.findall(stderr)
    if not found:
        return {}, ""
    text, parser = found[-1]
    counts = {status: int(count) for count, status in re.findall(r"(\d+) (\w+)", text)}
    return counts, parser


def first_try(repo: str, path: Path, timeout: float, env: dict[str, str], logs: Path) -> dict:
    code, out, err, seconds = cli(["sandbox", "run", "--repo", str(path), "--timeout", str(int(timeout))],
                                  timeout + 1800, env)
    logs.mkdir(parents=True, exist_ok=True)
    (logs / f"{repo.replace('/', '__')}.log").write_text(f"$ exit {code} in {seconds:.1f}s\n--- stderr\n{err}\n--- stdout\n{out}")
    counts, parser = statuses(err)
    line = next((text for text in err.splitlines() if text.startswith("environment:")), "")
    tests = next((text for text in err.splitlines() if text.startswith("the repository's tests: ")), "")
    return {"first_seconds": round(seconds, 1), "exit": code, "tests": counts, "parser": parser,
            "executed": sum(counts.values()) > 0, "environment": line[:400], "command": re.sub(r" \(read as \S+\)$", "", tests[24:])[:300],
            "built": BUILT.findall(err), "warnings": [w[:300] for w in err.splitlines() if w.startswith("warning: ")],
            "mirror_incomplete": bool(INCOMPLETE.search(err))}


def cached_starts(path: Path, python: Path, runs: int, env: dict[str, str]) -> tuple[float, float]:
    ours, theirs = [], []
    for _ in range(runs):  # in turns: the shared machine's load falls on both alike
        for target, into in ((path, ours), (python, theirs)):
            code, _, err, seconds = cli(["sandbox", "run", "--repo", str(target), "--", "true"], 900, env)
            if code == 0:
                into.append(seconds)
    return (statistics.median(ours) if ours else float("nan")), (statistics.median(theirs) if theirs else float("nan"))


def load(path: Path) -> dict[str, dict]:
    done: dict[str, dict] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                done[row["repo"]] = row
    return done


def table(rows: dict[str, dict], ecosystems: dict[str, list[str]]) -> str:
    lines = ["| ecosystem | repository | first try: tests executed and parsed | first build s | cached start s "
             "(Python's) | ratio | environment |", "|---|---|---|---|---|---|---|"]
    for ecosystem, repos in ecosystems.items():
        for repo in repos:
            row = rows.get(repo)
            if row is None:
                lines.append(f"| {ecosystem} | {repo} | not run | | | | |")
                continue
            if row.get("missing") or row.get("mirror_incomplete"):
                said = "not fetched" if row.get("missing") else "not measured: its mirror lacks a file of the commit"
                lines.append(f"| {ecosystem} | {repo} | {said} | | | | |")
                continue
            counts = ", ".join(f"{n} {s}" for s, n in row["tests"].items()) or "none parsed"
            verdict = ("yes" if row["executed"] else "**no**") + f" ({counts})"
            said = re.sub(r"^environment: ", "", row["environment"]).split(" on codeagent/base")[0]
            lines.append(f"| {ecosystem} | {repo} | {verdict} | {row['first_seconds']:.0f} | "
                         f"{row.get('cached', float('nan')):.2f} ({row.get('python_cached', float('nan')):.2f}) | "
                         f"{row.get('ratio', float('nan')):.2f}x | {said} |")
    for ecosystem, repos in ecosystems.items():
        ran = [rows[r] for r in repos if r in rows and not rows[r].get("missing") and not rows[r].get("mirror_incomplete")]
        if ran:
            ratios = [row["ratio"] for row in ran if row.get("ratio") == row.get("ratio")]
            lines.append(f"\n{ecosystem}: {sum(row['executed'] for row in ran)}/{len(ran)} run at the first try"
                         + (f"; cached start {statistics.median(ratios):.2f}x Python's (median)" if ratios else ""))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="", help="ecosystems, comma-separated (default: all)")
    parser.add_argument("--repos", default="", help="these repositories only")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1500, help="seconds for the tests' run")
    parser.add_argument("--mirrors", type=Path, default=MIRRORS)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--logs", type=Path, default=Path(tempfile.gettempdir()) / "codeagent-env-repos")
    parser.add_argument("--again", action="store_true")
    parser.add_argument("--table", action="store_true")
    args = parser.parse_args()
    spec = yaml.safe_load(LIST.read_text())
    ecosystems: dict[str, list[str]] = spec["ecosystems"]
    done = load(args.results)
    if args.table:
        print(table(done, ecosystems))
        return
    config = Path(tempfile.mkdtemp(prefix="codeagent-bench-")) / "config.yaml"
    config.write_text("{}\n")
    env = {**os.environ, "CODEAGENT_CONFIG": str(config), "PYTHONPATH": str(ROOT)}
    python = mirror_of(spec["python"], args.mirrors)
    if python is None:
        raise SystemExit(f"the Python repository {spec['python']} is not fetched into {args.mirrors}")
    wanted = set(filter(None, args.only.split(","))) or set(ecosystems)
    only = set(filter(None, args.repos.split(",")))
    args.results.parent.mkdir(parents=True, exist_ok=True)
    for ecosystem, repos in ecosystems.items():
        for repo in repos:
            if ecosystem not in wanted or (only and repo not in only) or (repo in done and not args.again):
                continue
            path = mirror_of(repo, args.mirrors)
            row: dict = {"repo": repo, "ecosystem": ecosystem}
            if path is None:
                row["missing"] = True
            else:
                head = subprocess.run(["git", f"--git-dir={path if path.name != '.git' else path}", "rev-parse", "HEAD"],
                                      capture_output=True, text=True).stdout.strip()
                row.update(commit=head, **first_try(repo, path, args.timeout, env, args.logs))
                if not row["mirror_incomplete"]:
                    row["cached"], row["python_cached"] = cached_starts(path, python, args.runs, env)
                    row["ratio"] = round(row["cached"] / row["python_cached"], 2) if row["python_cached"] else None
                    row["cached"], row["python_cached"] = round(row["cached"], 2), round(row["python_cached"], 2)
                row["load"] = round(os.getloadavg()[0], 2)
            with args.results.open("a") as out:
                out.write(json.dumps(row) + "\n")
            print(f"{ecosystem:6} {repo:40} executed={row.get('executed')} tests={row.get('tests')} "
                  f"first={row.get('first_seconds')}s cached={row.get('cached')}s ({row.get('ratio')}x)", flush=True)


if __name__ == "__main__":
    main()
