"""Do the environment specs of repositories too large to fetch here build? (issue 12)

For every (repo, version) selected, builds the env and instance images of the spec on a stand-in
repository (codeagent/harness/specs/stand_in.py: the package directory, a setup.py, the requirement
files the spec names, each with one small requirement), then prints one row per pair: built or
failed, with the cause (the last lines of the failing build step). Images are cached by their
content keys: pairs sharing an env image build it once. Build logs go under OUTPUT/<pair>/.

Usage: python bench/spec_builds.py [--repo django/django ...] [--versions 3.0,4.1] [--all]
           [--output DIR] [--table-only]
  --all: every version of SWE-bench full and Verified (_official_versions.yaml), not only Lite's.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import yaml

from codeagent.data.swebench import load_rows
from codeagent.harness.layers.python_env import task_images
from codeagent.harness.specs.stand_in import stand_in_task
from codeagent.harness.specs.swebench import spec_dir

REPOS = ("django/django", "matplotlib/matplotlib", "scikit-learn/scikit-learn")
LITE = ("lite", "lite-dev")


def lite_versions(repo: str) -> list[str]:
    versions = set()
    for name in LITE:
        try:
            versions |= {row["version"] for row in load_rows(name) if row["repo"] == repo}
        except Exception as exc:  # a split not present here: say so, use the others
            print(f"note: dataset {name} not read ({exc})")
    return sorted(versions, key=lambda v: tuple(int(p) for p in v.lstrip("v").split(".")))


def official_versions(repo: str) -> list[str]:
    data = yaml.safe_load((spec_dir() / "_official_versions.yaml").read_text())
    return list(data["test"].get(repo, [])) + list(data.get("dev", {}).get(repo, []))


def cause(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    interesting = [line for line in lines if "error" in line.lower() or "failed" in line.lower()]
    return " / ".join((interesting or lines)[-3:])[:300]


def build(repo: str, version: str, out: Path) -> dict:
    folder = out / f"{repo.replace('/', '__')}-{version}"
    started = time.monotonic()
    row = {"repo": repo, "version": version}
    try:
        with tempfile.TemporaryDirectory(prefix="codeagent-stand-in-") as root:
            task, spec = stand_in_task(repo, version, Path(root))
            row["python"] = spec.python_used if not spec.fallback else f"{spec.python_requested} -> {spec.python_used}"
            images = task_images(task, spec, folder)
            row.update(result="built", env=images.env, cached=not images.built)
    except Exception as exc:
        row.update(result="failed", cause=f"{type(exc).__name__}: {cause(exc)}")
    row["seconds"] = round(time.monotonic() - started, 1)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "result.json").write_text(json.dumps(row, indent=1))
    return row


def table(rows: list[dict]) -> list[str]:
    lines = ["| repo | version | python | result | env image | seconds | cause when it fails |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        env = row.get("env", "-") + (" (cached)" if row.get("cached") else "")
        lines.append(f"| {row['repo']} | {row['version']} | {row.get('python', '?')} | {row['result']} | {env} | "
                     f"{row.get('seconds', '-')} | {row.get('cause', '').replace('|', '/')} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", action="append", help="owner/name (repeatable); default: django, matplotlib, "
                                                        "scikit-learn")
    parser.add_argument("--versions", help="comma-separated versions (default: those of SWE-bench Lite)")
    parser.add_argument("--all", action="store_true", help="every version of full and Verified")
    parser.add_argument("--output", default="codeagent-eval/spec-builds")
    parser.add_argument("--table-only", action="store_true", help="print the table from results already there")
    args = parser.parse_args()

    out = Path(args.output)
    rows = []
    for repo in args.repo or REPOS:
        versions = (args.versions.split(",") if args.versions
                    else official_versions(repo) if args.all else lite_versions(repo))
        for version in versions:
            done = out / f"{repo.replace('/', '__')}-{version}" / "result.json"
            if args.table_only or (done.is_file() and json.loads(done.read_text())["result"] == "built"):
                rows.append(json.loads(done.read_text()) if done.is_file()
                            else {"repo": repo, "version": version, "result": "not run"})
                continue
            row = build(repo, version, out)
            print(f"{repo} {version}: {row['result']} {row.get('cause', '')} ({row['seconds']} s)", flush=True)
            rows.append(row)
    print("\n".join(table(rows)))
    built = sum(row["result"] == "built" for row in rows)
    print(f"\nbuilt {built}/{len(rows)}")


if __name__ == "__main__":
    main()
