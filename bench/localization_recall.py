"""Localization recall on SWE-bench Lite: BM25 alone vs repo map alone vs mentions alone vs fusion.

For each Lite instance whose repository is available locally, the tree at `base_commit` is
extracted into a temporary folder (indexable source files only, unless --full-tree; blobs are
read with `git cat-file --batch`), `codeagent.code.localize` ranks its
files for the problem statement, and the files the gold patch touches are the ground truth.

    python bench/localization_recall.py --repos /work/.mirror --out evals/localization

`--repos DIR` holds git directories (bare or not) as DIR/owner/name, DIR/owner+name/repo or
DIR/owner+name. Results: recall@1/5/10 (mean over instances of the share of gold files in the
top k) per repository and overall, for every method, plus seconds per instance. Instances of one
repository share a parse cache keyed by file content (as an agent's long-lived index would);
the first instance of each repository is a cold start.
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

KS = (1, 5, 10)


def find_git_dir(repos: Path, repo: str) -> Path | None:
    owner, name = repo.split("/")
    for candidate in (repos / owner / name, repos / f"{owner}+{name}" / "repo", repos / f"{owner}+{name}"):
        if candidate.is_dir():
            git_dir = candidate / ".git" if (candidate / ".git").is_dir() else candidate
            if (git_dir / "HEAD").exists():
                return git_dir
    return None


def gold_files(patch: str) -> list[str]:
    return sorted(set(re.findall(r"^diff --git a/(\S+) b/", patch, flags=re.MULTILINE)))


def extract_tree(git_dir: Path, commit: str, destination: Path, suffixes: tuple[str, ...] | None) -> int:
    """Write the tree at `commit` (only files ending with `suffixes`, or all when None).

    Reads blobs with `git cat-file --batch` rather than `git archive`, so that a mirror missing a
    few large blobs (snapshots leave some out) still yields every file it has. Returns the number
    of missing blobs."""
    listing = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", "--full-tree", commit],
        capture_output=True, check=True,
    ).stdout.decode("utf-8", errors="surrogateescape")
    wanted: list[tuple[str, str]] = []
    for entry in listing.split("\0"):
        if not entry:
            continue
        meta, path = entry.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind == "blob" and mode != "120000" and (suffixes is None or path.endswith(suffixes)):
            wanted.append((sha, path))
    batch = subprocess.run(
        ["git", "--git-dir", str(git_dir), "cat-file", "--batch"],
        input="".join(f"{sha}\n" for sha, _ in wanted).encode(), capture_output=True, check=True,
    ).stdout
    missing, offset = 0, 0
    for _, path in wanted:
        end = batch.index(b"\n", offset)
        header = batch[offset:end].split()
        offset = end + 1
        if header[-1] == b"missing":
            missing += 1
            continue
        size = int(header[2])
        target = destination / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(batch[offset : offset + size])
        offset += size + 1
    return missing


def experimental_signals(localizer, issue_text: str, signals) -> dict[str, dict[str, float]]:
    """Variants to compare offline (not used by `localize`)."""
    import numpy as np

    from codeagent.code.mentions import extract_mentions

    out = {}
    out["repomap_global"], _ = localizer.repomap.rank_files()
    bm25_top = sorted(signals.bm25.items(), key=lambda kv: -kv[1])[:20]
    best = bm25_top[0][1] if bm25_top else 1.0
    seed = dict(signals.mentions)
    for path, score in bm25_top:
        seed[path] = seed.get(path, 0.0) + score / best
    mentions = extract_mentions(issue_text)
    idents = {i: min(w, 3.0) * localizer.specificity(i) for i, w in mentions.identifiers.items()}
    out["repomap_seeded"], _ = localizer.repomap.rank_files(seed, idents)
    chunks = localizer.chunks
    top3: dict[str, list[float]] = {}
    for i in np.nonzero(signals.chunk_scores > 0)[0]:
        top3.setdefault(chunks.chunks[i].path, []).append(float(signals.chunk_scores[i]))
    out["bm25_top3"] = {p: sum(sorted(v)[-3:]) for p, v in top3.items()}
    return out


def recall_at(ranked: list[str], gold: list[str], k: int) -> float:
    return len(set(ranked[:k]) & set(gold)) / len(gold) if gold else 0.0


def round_robin(instances: list[dict]) -> list[dict]:
    """Interleave repositories so a time-limited run still covers every one; within a repository,
    by creation date, so consecutive instances share most files (and the parse cache)."""
    by_repo: dict[str, list[dict]] = defaultdict(list)
    for inst in sorted(instances, key=lambda i: i["created_at"]):
        by_repo[inst["repo"]].append(inst)
    out: list[dict] = []
    queues = [list(v) for _, v in sorted(by_repo.items())]
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def summarize(rows: list[dict], methods: list[str]) -> dict:
    def block(subset: list[dict]) -> dict:
        out = {"instances": len(subset)}
        for m in methods:
            out[m] = {f"recall@{k}": round(statistics.mean(r["recall"][m][str(k)] for r in subset), 4) for k in KS}
        out["seconds_mean"] = round(statistics.mean(r["seconds"] for r in subset), 2)
        out["seconds_median"] = round(statistics.median(r["seconds"] for r in subset), 2)
        return out

    per_repo = defaultdict(list)
    for r in rows:
        per_repo[r["repo"]].append(r)
    return {"overall": block(rows), "per_repo": {repo: block(rs) for repo, rs in sorted(per_repo.items())}}


def markdown(summary: dict, methods: list[str], title: str) -> str:
    lines = [f"# {title}", "", "recall@k = mean over instances of (gold files in top k) / (gold files).", ""]
    header = "| repo | n | " + " | ".join(f"{m} @1 / @5 / @10" for m in methods) + " | s/inst (median) |"
    lines += [header, "|" + "---|" * (len(methods) + 3)]
    rows = list(summary["per_repo"].items()) + [("**overall**", summary["overall"])]
    for repo, b in rows:
        cells = [" / ".join(f"{b[m][f'recall@{k}']:.2f}" for k in KS) for m in methods]
        lines.append(f"| {repo} | {b['instances']} | " + " | ".join(cells) + f" | {b['seconds_median']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repos", type=Path, required=True)
    parser.add_argument("--data", default="lite", help="dataset name or file (codeagent.data.swebench)")
    parser.add_argument("--out", type=Path, default=Path("evals/localization"))
    parser.add_argument("--name", default="results", help="output file stem")
    parser.add_argument("--only", nargs="*", default=[], help="repos (owner/name) or instance ids")
    parser.add_argument("--limit", type=int, default=0, help="at most this many instances")
    parser.add_argument("--dump-signals", type=Path, help="write each instance's per-signal top-300 scores (JSONL) for offline fusion tuning")
    parser.add_argument("--full-tree", action="store_true", help="extract every file, not only indexable sources")
    parser.add_argument("--time-budget", type=float, default=0, help="stop starting new instances after this many seconds")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from codeagent.code.languages import supported_extensions
    from codeagent.code.localize import METHODS, Localizer
    from codeagent.code.tags import TagCache
    from codeagent.data.swebench import load_rows

    data = load_rows(args.data)
    available = {}
    for inst in data:
        if inst["repo"] not in available:
            available[inst["repo"]] = find_git_dir(args.repos, inst["repo"])
    todo = [i for i in data if available.get(i["repo"])]
    if args.only:
        todo = [i for i in todo if i["repo"] in args.only or i["instance_id"] in args.only]
    todo = round_robin(todo)
    if args.limit:
        todo = todo[: args.limit]
    missing = sorted(r for r, g in available.items() if g is None)
    print(f"{len(todo)} instances; repositories missing: {', '.join(missing) or 'none'}", flush=True)

    caches: dict[str, tuple[TagCache, dict]] = {}
    rows: list[dict] = []
    started = time.time()
    methods = list(METHODS)
    for n, inst in enumerate(todo, 1):
        if args.time_budget and time.time() - started > args.time_budget:
            print(f"time budget reached after {len(rows)} instances", flush=True)
            break
        gold = gold_files(inst["patch"])
        tag_cache, token_cache = caches.setdefault(inst["repo"], (TagCache(), {}))
        cold = not token_cache
        with tempfile.TemporaryDirectory(prefix="loc-") as tmp:
            t0 = time.time()
            suffixes = None if args.full_tree else tuple(supported_extensions())
            missing = extract_tree(available[inst["repo"]], inst["base_commit"], Path(tmp), suffixes)
            t1 = time.time()
            localizer = Localizer(tmp, cache=tag_cache, token_cache=token_cache)
            signals = localizer.signals(inst["problem_statement"])
            rankings = localizer.rankings(inst["problem_statement"], signals=signals)
            t2 = time.time()
            if args.dump_signals:
                top = lambda scores: dict(sorted(scores.items(), key=lambda kv: -kv[1])[:300])
                record = {"instance_id": inst["instance_id"], "repo": inst["repo"], "gold": gold,
                          "mentions": top(signals.mentions), "bm25": top(signals.bm25), "repomap": top(signals.repomap),
                          "named": sorted(signals.named_files)}
                record.update({k: top(v) for k, v in experimental_signals(localizer, inst["problem_statement"], signals).items()})
                with args.dump_signals.open("a") as handle:
                    handle.write(json.dumps(record) + "\n")
        # Keep the caches from growing without bound: drop token entries of files not seen now.
        live = {(p, d) for p, d in localizer.index.digests.items()}
        for key in [k for k in token_cache if k not in live]:
            del token_cache[key]
        row = {
            "instance_id": inst["instance_id"],
            "repo": inst["repo"],
            "gold": gold,
            "cold": cold,
            "seconds": round(t2 - t1, 2),
            "extract_seconds": round(t1 - t0, 2),
            "missing_blobs": missing,
            "recall": {m: {str(k): recall_at(rankings[m], gold, k) for k in KS} for m in methods},
            "top10_fusion": rankings["fusion"][:10],
        }
        rows.append(row)
        r = row["recall"]
        print(
            f"[{n}/{len(todo)}] {inst['instance_id']}: fusion@5={r['fusion']['5']:.2f} bm25@5={r['bm25']['5']:.2f} "
            f"repomap@5={r['repomap']['5']:.2f} mentions@5={r['mentions']['5']:.2f} ({row['seconds']}s{' cold' if cold else ''})",
            flush=True,
        )
    if not rows:
        print("no instance ran", file=sys.stderr)
        return 1
    summary = summarize(rows, methods)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"dataset": str(args.data.name), "methods": methods, "summary": summary, "instances": rows}
    (args.out / f"{args.name}.json").write_text(json.dumps(result, separators=(",", ":")) + "\n")
    table = markdown(summary, methods, f"Localization recall on SWE-bench Lite ({len(rows)} instances)")
    (args.out / f"{args.name}.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
