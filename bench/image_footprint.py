"""Environment image footprint: bytes on disk per instance and per environment image, before and after (issue 27).

For each side (a codeagent source tree: BEFORE, e.g. a worktree of main, and AFTER, this one), grades
the gold patch of every selected SWE-bench instance with that tree's own harness (`grade_batch`, the
code `codeagent eval grade --gold` runs), which builds the task images it needs. The two sides'
images never collide: each side's harness names its images under its own prefix (`fp-before/env`,
`fp-after/instance`, ... instead of `codeagent/...`); the suite base images (`codeagent/base`) are
not the harness's: both sides use the same ones, and count them.

Then it reads every image's layers (`docker image inspect`: RootFS.Layers and Size) and counts the
bytes a node holds for the whole batch: each distinct layer once, wherever it is shared. An image's
own bytes are its Size less its nearest ancestor's in the set (the image whose layers are a prefix
of its own), so a layer shared by many images counts once. Printed per side, then the ratio:

  per instance   bytes on disk of all the batch's images (base, environment, instance layers) / instances
  per env image  its full size, and the bytes above the suite base that are its alone (not shared with
                 another environment of the batch)
  gold           every instance's gold patch must resolve on both sides (the footprint must not cost a verdict)

Images the bench built are removed at the end (`--keep` keeps them); the base images are left.
`--build-only` builds every instance's images as grading does (`image_source(task).grading()`) and runs
no test: the bytes of a whole repository without its test time; grade a sample (`--instance`) to check
the verdicts.

Usage: python bench/image_footprint.py --dataset FILE --repos DIR --repo pallets/flask --repo psf/requests
           --before TREE [--after TREE] [--output DIR] [--workers 1] [--keep] [--measure-only]
           [--build-only] [--instance ID ...] [--sides after] [--image-prefix fp]
  DIR/owner/name: a git clone or mirror of each repository; TREE: a codeagent checkout (default after: here).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
PREFIX = "fp"
MB = 1_000_000


# -- one side: run inside a subprocess whose PYTHONPATH is the side's tree ------------------------------

def rename_images(prefix: str) -> list[str]:
    """Point the harness's image names (environment.py's *_IMAGE, `codeagent/...`) at `prefix/...`."""
    from codeagent.harness.layers import python_env as environment

    renamed = []
    for name, value in vars(environment).items():
        if name.endswith("_IMAGE") and isinstance(value, str) and value.startswith("codeagent/"):
            setattr(environment, name, f"{prefix}/{value.removeprefix('codeagent/')}")
            renamed.append(getattr(environment, name))
    return renamed


def run_side(args: argparse.Namespace) -> None:
    from codeagent.evals.batch import grade_batch
    from codeagent.evals.tasks import eval_tasks
    from codeagent.executors.local import LocalExecutor

    renamed = rename_images(args.prefix)
    only = ",".join(args.instance) or None
    tasks = [task for repo in args.repo for task in eval_tasks(args.dataset, only, None, repo, None, args.repos)]
    out = Path(args.output)
    if args.build_only:
        rows = build_images(tasks, out, args.workers)
        (out / "side.json").write_text(json.dumps({"prefix": args.prefix, "renamed": renamed, "instances": rows,
                                                   "graded": False}, indent=1))
        return
    gold = {task.instance_id: task.gold_patch or "" for task in tasks}
    # threads: the renaming above is this process's; worker processes would not see it
    reports = grade_batch(tasks, gold, out / "gold", model_name="gold", executor=LocalExecutor(args.workers, threads=True))
    rows = [{"instance_id": report.get("instance_id"), "resolved": bool(report.get("resolved")),
             "statuses": statuses(out / "gold" / "instances" / str(report.get("instance_id")), report),
             "outcome": report.get("outcome"), "images": report.get("images") or {},
             "layers_built": report.get("layers_built") or [], "image_seconds": report.get("image_seconds")}
            for report in reports]
    (out / "side.json").write_text(json.dumps({"prefix": args.prefix, "renamed": renamed, "instances": rows}, indent=1))


def build_images(tasks: list, out: Path, workers: int) -> list[dict]:
    """Build every task's images as grading does (`image_source(task).grading()`), running no test."""
    from concurrent.futures import ThreadPoolExecutor

    from codeagent.harness.env_images import image_source

    def build(task) -> dict:
        row = {"instance_id": task.instance_id, "resolved": False, "statuses": {}, "outcome": "built"}
        try:
            facts = image_source(task).grading(out / "build" / task.instance_id).facts
        except Exception as exc:  # one environment that does not build must not stop the batch
            return {**row, "outcome": f"build failed: {str(exc)[:300]}", "images": {}, "layers_built": []}
        print(f"built {task.instance_id}: {len(facts.get('layers_built') or [])} layers, "
              f"{facts.get('image_seconds')} s", flush=True)
        return {**row, "images": facts.get("images") or {}, "layers_built": facts.get("layers_built") or [],
                "image_seconds": facts.get("image_seconds")}

    with ThreadPoolExecutor(max(1, workers)) as pool:  # threads: the renaming is this process's
        return list(pool.map(build, tasks))


def statuses(folder: Path, report: dict) -> dict[str, str]:
    """Every test's status in the instance's whole test log (not only the graded lists)."""
    from codeagent.harness.logs.parsers import parse_log

    log = folder / "test_output.txt"
    if not log.is_file() or not report.get("log_parser"):
        return {}
    parsed = parse_log(report["log_parser"], log.read_text(errors="replace"))
    return {name: str(getattr(status, "value", status)) for name, status in parsed.items()}


# -- measuring -------------------------------------------------------------------------------------------

def _inspect(names: list[str]) -> dict[str, dict]:
    found = {}
    for name in dict.fromkeys(names):
        proc = subprocess.run(["docker", "image", "inspect", name], capture_output=True, text=True)
        if proc.returncode == 0:
            data = json.loads(proc.stdout)[0]
            found[name] = {"size": int(data["Size"]), "layers": list(data["RootFS"]["Layers"]), "id": data["Id"]}
    return found


def inspect(tags: list[str]) -> dict[str, dict]:
    """tag -> {"size": bytes, "layers": [diff ids]} for every tag that exists, and every other local
    image whose layers they stand on (an intermediate layer the reports do not name: counted once)."""
    found = _inspect(tags)
    ids = subprocess.run(["docker", "images", "-q", "--no-trunc"], capture_output=True, text=True).stdout.split()
    known = {image["id"] for image in found.values()}
    candidates = {}
    rest = [image_id for image_id in dict.fromkeys(ids) if image_id not in known]
    for start in range(0, len(rest), 200):  # one call per 200 images: the found ones come back, keyed by Id
        proc = subprocess.run(["docker", "image", "inspect", *rest[start:start + 200]], capture_output=True, text=True)
        for data in json.loads(proc.stdout or "[]"):
            candidates[data["Id"]] = {"size": int(data["Size"]), "layers": list(data["RootFS"]["Layers"]), "id": data["Id"]}
    for image_id, image in candidates.items():
        if image["layers"] and any(len(image["layers"]) < len(other["layers"]) and is_prefix(image["layers"], other["layers"])
                                   for other in list(found.values())):
            found[image_id] = image
    return found


def is_prefix(short: list[str], long: list[str]) -> bool:
    return len(short) <= len(long) and long[:len(short)] == short


def own_bytes(images: dict[str, dict]) -> dict[str, int]:
    """Each image's bytes that its nearest ancestor in the set does not hold (Size less the ancestor's).
    Images with the same layers (two tags of one image) count once: the first keeps the bytes."""
    own, seen = {}, set()
    for tag, image in images.items():
        chain = tuple(image["layers"])
        if chain in seen:
            own[tag] = 0
            continue
        seen.add(chain)
        ancestors = [other for other in images.values()
                     if len(other["layers"]) < len(chain) and is_prefix(other["layers"], list(chain))]
        parent = max(ancestors, key=lambda other: len(other["layers"]), default=None)
        own[tag] = image["size"] - (parent["size"] if parent else 0)
    return own


def measure(side: dict) -> dict:
    rows = side["instances"]
    roles: dict[str, str] = {}
    for row in rows:
        for role, tag in row["images"].items():
            roles.setdefault(tag, role)
    images = inspect(list(roles))
    own = own_bytes(images)
    total = sum(own.values())
    bases = [tag for tag, role in roles.items() if role == "base" and tag in images]
    base_bytes = sum(own[tag] for tag in bases)
    envs = {}
    for row in rows:
        env = row["images"].get("env")
        if env in images:
            entry = envs.setdefault(env, {"instances": 0, "size": images[env]["size"]})
            entry["instances"] += 1
    for env, entry in envs.items():
        chain = images[env]["layers"]
        below = [tag for tag in images if tag != env and is_prefix(images[tag]["layers"], chain)]
        base = max((images[tag]["size"] for tag in below if tag in bases), default=0)
        # its own: above the deepest image under it that a base is, or another environment stands on too
        shared = [tag for tag in below if tag in bases or any(
            other != env and is_prefix(images[tag]["layers"], images[other]["layers"]) for other in envs)]
        entry["above_base"] = entry["size"] - base
        system = next((row["images"].get("system") for row in rows if row["images"].get("env") == env), None)
        entry["layer"] = entry["size"] - (images[system]["size"] if system in images else base)  # the env layer alone
        entry["own"] = entry["size"] - max((images[tag]["size"] for tag in shared), default=0)
        entry["leftovers"] = leftovers(env)
    instances = [row for row in rows if row["images"].get("instance") in images]
    instance_own = sorted(own[row["images"]["instance"]] for row in instances)
    parts = [instance_parts(row["images"]["instance"]) for row in instances]
    return {"instances": len(rows), "measured": len(instances), "images": len(images), "total": total,
            "base": base_bytes, "per_instance": total / max(1, len(rows)),
            "per_instance_above_base": (total - base_bytes) / max(1, len(rows)),
            "instance_layer_median": instance_own[len(instance_own) // 2] if instance_own else 0,
            "instance_parts_median": {part: sorted(found[part] for found in parts)[len(parts) // 2]
                                      for part in INSTANCE_PARTS} if parts else {},
            "envs": envs, "gold": sum(row["resolved"] for row in rows), "graded": side.get("graded", True),
            "not_resolved": [f"{row['instance_id']} ({row['outcome']})" for row in rows
                             if not row["resolved"] and row["outcome"] != "built"]}


# What only building needs, each cleanup's share of an environment image (after: gone)
LEFTOVERS = {"apt cache": "/var/cache/apt", "apt lists": "/var/lib/apt/lists", "Debian docs": "/usr/share/doc",
             "man/info pages": "/usr/share/man /usr/share/info", "pip cache": "/root/.cache/pip"}


def sizes_in(image: str, paths: dict[str, str], measure: str) -> dict[str, int]:
    """Bytes of each entry of `paths` in `image`, as `measure` (a shell command with {paths}) prints them, run in
    a throwaway container with no network."""
    script = "; ".join(f"echo {i} $({measure.format(paths=where)})" for i, where in enumerate(paths.values()))
    proc = subprocess.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "sh", image, "-c", script],
                          capture_output=True, text=True)
    sizes = dict(line.split()[:2] for line in proc.stdout.splitlines() if len(line.split()) == 2)
    return {name: int(sizes.get(str(i), 0)) for i, name in enumerate(paths)}


def leftovers(image: str) -> dict[str, int]:
    """Bytes under each of LEFTOVERS' paths in `image` (du)."""
    return sizes_in(image, LEFTOVERS, "du -sxbc {paths} 2>/dev/null | tail -1 | cut -f1")


# What the instance layer holds (only it has /testbed): the files' own bytes, as `find -printf %s` sums them
INSTANCE_PARTS = {"working tree": "/testbed -path /testbed/.git -prune -o", "git objects": "/testbed/.git/objects",
                  "git, the rest": "/testbed/.git -path /testbed/.git/objects -prune -o"}


def instance_parts(image: str) -> dict[str, int]:
    """Bytes of each of INSTANCE_PARTS in `image` (the files' own sizes, summed)."""
    return sizes_in(image, INSTANCE_PARTS, "find {paths} -type f -printf '%s\\n' 2>/dev/null | awk '{{s+=$1}} END {{print s+0}}'")


def report(name: str, figures: dict) -> list[str]:
    lines = [f"## {name}: {figures['instances']} instances, {figures['images']} images, "
             + (f"gold resolves {figures['gold']}/{figures['instances']}" if figures.get("graded", True)
              else "built only, not graded"),
             f"  on disk, all layers once:      {figures['total'] / MB:9.1f} MB  "
             f"(suite bases {figures['base'] / MB:.1f} MB of it)",
             f"  per instance:                  {figures['per_instance'] / MB:9.1f} MB  "
             f"({figures['per_instance_above_base'] / MB:.1f} MB above the bases)",
             f"  instance layer, median:        {figures['instance_layer_median'] / MB:9.1f} MB  ("
             + ", ".join(f"{part} {size / MB:.1f}" for part, size in (figures.get("instance_parts_median") or {}).items())
             + " MB, medians)",
             "  env images (instances): full size / above the suite base / its own in this batch / the env layer alone"]
    for env, entry in sorted(figures["envs"].items()):
        lines.append(f"    {env:44s} ({entry['instances']:2d})  {entry['size'] / MB:7.1f} / {entry['above_base'] / MB:7.1f}"
                     f" / {entry['own'] / MB:7.1f} / {entry['layer'] / MB:7.1f} MB")
    for env, entry in sorted(figures["envs"].items()):
        sizes = entry.get("leftovers") or {}
        lines.append(f"    {env}: " + ", ".join(f"{what} {size / MB:.1f} MB" for what, size in sizes.items()))
    if figures["not_resolved"]:
        lines.append(("  gold NOT resolved: " if figures.get("graded", True) else "  NOT built: ") + ", ".join(figures["not_resolved"]))
    return lines


def remove(side: dict) -> None:
    prefix = side["prefix"] + "/"
    tags = {tag for row in side["instances"] for tag in row["images"].values() if tag.startswith(prefix)}
    proc = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True, text=True)
    tags |= {tag for tag in proc.stdout.split() if tag.startswith(prefix)}  # the layers a failed grading left
    if tags:
        subprocess.run(["docker", "rmi", *sorted(tags)], capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True, help="a SWE-bench data file (or data set name)")
    parser.add_argument("--repo", action="append", required=True, help="owner/name; every instance of it (repeat)")
    parser.add_argument("--repos", required=True, help="DIR/owner/name: the repositories")
    parser.add_argument("--before", required=True, help="the baseline codeagent tree")
    parser.add_argument("--after", default=str(HERE), help="the codeagent tree measured (default: this one)")
    parser.add_argument("--output", default="codeagent-eval/image-footprint")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the images built")
    parser.add_argument("--measure-only", action="store_true", help="measure the images of an earlier run")
    parser.add_argument("--sides", default="before,after", help="which sides to run and measure")
    parser.add_argument("--image-prefix", default=PREFIX, help="the images are named PREFIX-SIDE/... (default fp)")
    parser.add_argument("--instance", action="append", default=[], help="only these instances (repeat)")
    parser.add_argument("--build-only", action="store_true",
                        help="build the images (as grading does) and measure them; grade nothing")
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        return run_side(args)

    out = Path(args.output)
    results = {}
    trees = {"before": args.before, "after": args.after}
    for name in args.sides.split(","):
        tree = trees[name]
        folder = out / name
        if not args.measure_only:
            folder.mkdir(parents=True, exist_ok=True)
            command = [sys.executable, str(Path(__file__).resolve()), "--side", name, "--prefix", f"{args.image_prefix}-{name}",
                       "--dataset", args.dataset, "--repos", args.repos, "--output", str(folder),
                       "--workers", str(args.workers), "--before", args.before,
                       *(["--build-only"] if args.build_only else []),
                       *[item for instance in args.instance for item in ("--instance", instance)],
                       *[item for repo in args.repo for item in ("--repo", repo)]]
            env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
            subprocess.run(command, env=env, cwd=tree, check=True)
        side = json.loads((folder / "side.json").read_text())
        results[name] = measure(side)
        print("\n".join(report(f"{name} ({tree})", results[name])), flush=True)
        groups: dict[str, list[dict]] = {}
        for row in side["instances"]:
            groups.setdefault(str(row["instance_id"]).rsplit("-", 1)[0], []).append(row)
        for group, rows in groups.items() if len(groups) > 1 else ():
            alone = measure({**side, "instances": rows})  # the repository graded alone: its images only
            print(f"  {group:28s} alone: {alone['instances']:3d} instances, {alone['per_instance'] / MB:7.1f} MB per "
                  f"instance ({alone['per_instance_above_base'] / MB:.1f} above the bases), largest env above its "
                  f"base {max((e['above_base'] for e in alone['envs'].values()), default=0) / MB:.0f} MB, "
                  f"gold {alone['gold']}/{alone['instances']}", flush=True)
        (folder / "figures.json").write_text(json.dumps(results[name], indent=1))
        if not args.keep:
            remove(side)
    if len(results) < 2:
        return
    before, after = results["before"], results["after"]
    sides = {name: {row["instance_id"]: row.get("statuses") for row in
                    json.loads((out / name / "side.json").read_text())["instances"]} for name in ("before", "after")}
    same = [i for i in sides["before"] if sides["before"][i] and sides["before"][i] == sides["after"].get(i)]
    differ = [i for i in sides["before"] if i not in same]
    if args.build_only:  # no test ran: no status or verdict to compare
        print("\nbuilt only: no test ran, no verdict on either side (grade a sample with --instance)")
    else:
        print(f"\nevery test of the log with the same status before and after: {len(same)}/{len(sides['before'])}"
              + (f" (differ or missing: {', '.join(differ)})" if differ else ""))
    print(f"per instance: {before['per_instance'] / MB:.1f} MB -> {after['per_instance'] / MB:.1f} MB, "
          f"ratio before/after {before['per_instance'] / max(1, after['per_instance']):.2f}x; "
          f"largest env image above its base: {max(e['above_base'] for e in before['envs'].values()) / MB:.0f} -> "
          f"{max(e['above_base'] for e in after['envs'].values()) / MB:.0f} MB; largest env layer alone: "
          f"{max(e['layer'] for e in before['envs'].values()) / MB:.0f} -> "
          f"{max(e['layer'] for e in after['envs'].values()) / MB:.0f} MB"
          + ("" if args.build_only else f"; gold {before['gold']}/{before['instances']} -> "
             f"{after['gold']}/{after['instances']}"))


if __name__ == "__main__":
    main()
