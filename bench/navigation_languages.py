"""Code navigation on real repositories, per language: how much of each tree the grammars read, and
localization recall on the repository's own fix commits, Python's figure beside the others.

    python bench/navigation_languages.py /work/.mirror/google+uuid/repo /work/.mirror/pallets+click/repo ...

For each git directory (bare or not):
- coverage: the tree at HEAD (indexable sources only) is indexed; per language, files, the share that
  parses without a syntax error, definitions per file, and seconds per 100 files (a cold index);
- recall: up to --commits recent non-merge commits whose message says it fixes something
  (`fix`, `fixes`, `fixed`) and that change 1-4 source files that are not tests; the tree at the parent
  is localized for the commit message; the files the commit changed are the truth. recall@1/5/10 =
  mean share of those files in the top k. A commit message is a shorter, more telling query than an
  issue: these figures compare languages with each other, not with SWE-bench's (bench/localization_recall.py).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.localization_recall import extract_tree, recall_at  # noqa: E402

KS = (1, 5, 10)
FIX = re.compile(r"\bfix(es|ed)?\b", re.IGNORECASE)
TRAILER = re.compile(r"^(Signed-off-by|Co-authored-by|Reviewed-by|Change-Id|PR-URL):.*$", re.MULTILINE | re.IGNORECASE)


def git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, check=True,
                          text=True, errors="replace").stdout


def coverage(root: Path) -> dict[str, dict]:
    from codeagent.code.index import RepoIndex

    started = time.perf_counter()
    index = RepoIndex(root)
    seconds = time.perf_counter() - started
    by_language: dict[str, list] = defaultdict(list)
    for tags in index.files.values():
        by_language[tags.language].append(tags)
    total = max(1, len(index.files))
    return {language: {"files": len(files),
                       "parsed_clean": round(sum(not t.has_errors for t in files) / len(files), 3),
                       "definitions_per_file": round(statistics.mean(len(t.symbols) for t in files), 1),
                       "seconds_per_100_files": round(100 * seconds / total, 2)}
            for language, files in sorted(by_language.items())}


def fix_commits(git_dir: Path, limit: int, scan: int) -> list[tuple[str, str, list[str]]]:
    """(commit, message, changed source files) of recent fixes that change 1-4 non-test sources."""
    from codeagent.code.files import is_test_path
    from codeagent.code.languages import spec_for_path

    log = git(git_dir, "log", "--no-merges", f"-n{scan}", "--format=%x1e%H%x00%B%x00", "--name-only", "HEAD")
    found = []
    for record in log.split("\x1e")[1:]:
        commit, message, names = (record.split("\x00") + ["", ""])[:3]
        if not FIX.search(message):
            continue
        changed = [n for n in names.split() if n]
        sources = [n for n in changed if spec_for_path(n) and not is_test_path(n)]
        if 1 <= len(sources) <= 4 and len(changed) <= 12:
            found.append((commit, TRAILER.sub("", message).strip(), sources))
        if len(found) >= limit:
            break
    return found


def recall(git_dir: Path, commits: list[tuple[str, str, list[str]]]) -> dict:
    from codeagent.code.index import RepoIndex
    from codeagent.code.languages import spec_for_source, supported_extensions
    from codeagent.code.localize import localize
    from codeagent.code.tags import TagCache

    cache, rows = TagCache(), []
    for commit, message, gold in commits:
        with tempfile.TemporaryDirectory(prefix="nav-") as tmp:
            extract_tree(git_dir, f"{commit}^", Path(tmp), tuple(supported_extensions()))
            ranked = [c.path for c in localize(tmp, message, k=max(KS), index=RepoIndex(tmp, cache=cache))]
            first = Path(tmp, gold[0])
            language = spec_for_source(gold[0], first.read_bytes() if first.is_file() else b"").name
        rows.append({"commit": commit[:10], "language": language,
                     **{f"recall@{k}": recall_at(ranked, gold, k) for k in KS}})
    by_language: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_language[row["language"]].append(row)
    return {language: {"commits": len(group), **{f"recall@{k}": round(statistics.mean(r[f"recall@{k}"] for r in group), 3)
                                                 for k in KS}}
            for language, group in sorted(by_language.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("git_dirs", nargs="+", type=Path)
    parser.add_argument("--commits", type=int, default=15, help="fix commits per repository")
    parser.add_argument("--scan", type=int, default=1500, help="how many recent commits to look through")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    results = {}
    print("| repository | language | files | parsed clean | defs/file | s/100 files | fixes | recall@1 / @5 / @10 |")
    print("|---|---|---|---|---|---|---|---|")
    for git_dir in args.git_dirs:
        name = git_dir.parent.name if git_dir.name in ("repo", ".git") else git_dir.name
        with tempfile.TemporaryDirectory(prefix="nav-") as tmp:
            from codeagent.code.languages import supported_extensions

            extract_tree(git_dir, "HEAD", Path(tmp), tuple(supported_extensions()))
            covered = coverage(Path(tmp))
        found = recall(git_dir, fix_commits(git_dir, args.commits, args.scan))
        results[name] = {"coverage": covered, "recall": found}
        for language, row in covered.items():
            r = found.get(language)
            cells = (f"{r['commits']} | {r['recall@1']:.2f} / {r['recall@5']:.2f} / {r['recall@10']:.2f}" if r
                     else "0 | -")
            print(f"| {name} | {language} | {row['files']} | {row['parsed_clean']:.0%} | {row['definitions_per_file']} "
                  f"| {row['seconds_per_100_files']} | {cells} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
