"""Rebuild evals/multilingual/instances.jsonl: real instances in Go, Rust, JavaScript, Java and C++.

Every instance is a merged pull request of a public repository, named in evals/multilingual/sources.yaml
with the commit that merged it. From the repository's git history:

- base_commit = that commit's first parent; the diff base..commit split the way SWE-bench's collection
  splits a pull request (swebench/collect/utils.py: a file whose path contains "test" goes to test_patch,
  every other file to patch);
- problem_statement = the commit's message (no issue text can be fetched here), created_at = its date;
- FAIL_TO_PASS / PASS_TO_PASS by running the tests on this machine's toolchains, in a scratch clone:
  the environment's install at the base (as SWE-bench builds its image), then the test patch, then
  pre_test and test_cmd RUNS times (default 2); then the patch on top, and the same again. Each test
  command's output is preceded by `+ COMMAND`, as the eval script's `set -x` prints it (the maven parser
  reads the test's name from that line), and the log is read by the parser the environment names.
  FAIL_TO_PASS: not passed in every run before, passed in every run after; PASS_TO_PASS: passed in
  every run before and after. A test whose status differs between runs of the same state is flaky and
  left out of both. An instance with no FAIL_TO_PASS is left out of the file (and said).

Results are kept per instance under WORK/results/ID.json (resumable: --rerun forgets them; --no-run
writes the file from them alone).
`--layout DIR` makes the folder `codeagent eval grade --repos DIR` reads (DIR/owner/name, a link to each
repository's git directory) and stops.

Usage:
    python bench/multilingual_instances.py --mirrors /path/to/mirrors [--work DIR] [--only ID,ID]
           [--runs 2] [--rerun] [--output evals/multilingual/instances.jsonl]
    python bench/multilingual_instances.py --mirrors /path/to/mirrors --layout DIR

A repository `owner/name` is looked up under --mirrors as owner+name/repo, owner+name, owner/name
(each a bare git directory or a clone); a full clone of each repository laid out as owner/name works.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "evals" / "multilingual" / "sources.yaml"
OUTPUT = ROOT / "evals" / "multilingual" / "instances.jsonl"
TEST_WORDS = ("test", "tests", "e2e", "testing")  # SWE-bench's collection rule (any of them in the path)
LIST_FIELDS = ("install", "pre_install", "pre_test", "system_packages")
# What the host run needs beside the spec (offline-friendly module/registry settings are the tools' defaults).
HOST_ENV = {"go": {"GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}, "rust": {}, "node": {}, "java": {}, "c/c++": {}}
COMMAND_TIMEOUT = 3600


# ------------------------------------------------------------------------------------- sources

def instance_id(repo: str, number: int) -> str:
    return f"{repo.replace('/', '__')}-{number}"


def environment(defaults: dict, entry: dict) -> dict:
    """The instance's environment (contract 2's LAYER + language): the repository's, then its own,
    `{target}` filled in and a `tests` list expanded to one test command per test."""
    env = {**defaults.get("environment", {}), **entry.get("environment", {})}
    target = str(entry.get("target", ""))
    for key, value in list(env.items()):
        if isinstance(value, str):
            env[key] = value.replace("{target}", target)
        elif isinstance(value, list):
            env[key] = [item.replace("{target}", target) for item in value]
    if "tests" in entry:
        env["test_cmd"] = [env["test_cmd"].replace("{test}", test) for test in entry["tests"]]
    missing = [key for key in ("language", "test_cmd", "log_parser") if not env.get(key)]
    if missing:
        raise SystemExit(f"{instance_id(entry['repo'], entry['number'])}: its environment has no {', '.join(missing)}")
    return env


def load_sources(path: Path = SOURCES) -> list[dict]:
    data = yaml.safe_load(path.read_text())
    out = []
    for entry in data["instances"]:
        repo_defaults = data["repos"][entry["repo"]]
        out.append({"instance_id": instance_id(entry["repo"], entry["number"]), "repo": entry["repo"],
                    "number": entry["number"], "commit": str(entry["commit"]),
                    "official": bool(entry.get("official", repo_defaults.get("official"))),
                    "environment": environment(repo_defaults, entry)})
    return out


# ----------------------------------------------------------------------------------------- git

def git_dir(mirrors: Path, repo: str) -> Path:
    owner, name = repo.split("/")
    for candidate in (mirrors / f"{owner}+{name}" / "repo", mirrors / f"{owner}+{name}", mirrors / owner / name):
        if (candidate / "objects").is_dir() or (candidate / ".git").exists():
            return candidate
    raise SystemExit(f"{repo}: no git directory under {mirrors} (tried {owner}+{name}/repo, {owner}+{name}, "
                     f"{owner}/{name})")


def git(repo: Path, *args: str) -> str:
    where = [f"--git-dir={repo}"] if (repo / "objects").is_dir() else ["-C", str(repo)]
    # bytes decoded as they are: text mode would turn a CRLF file's diff lines into LF (no longer applying)
    return subprocess.run(["git", *where, *args], check=True, capture_output=True).stdout.decode()


def split_diff(diff: str) -> tuple[str, str]:
    """(patch, test_patch): each file's section of the diff goes to one of them by its path."""
    sections = re.split(r"(?m)^(?=diff --git )", diff)
    patch, tests = [], []
    for section in filter(None, sections):
        path = re.match(r"diff --git a/(\S+) b/(\S+)", section).group(2)
        (tests if any(word in path for word in TEST_WORDS) else patch).append(section)
    return "".join(patch), "".join(tests)


def describe(repo_git: Path, source: dict) -> dict:
    """The instance's fields that come from the history alone."""
    commit = git(repo_git, "rev-parse", source["commit"] + "^{commit}").strip()
    base = git(repo_git, "rev-parse", commit + "^1").strip()
    patch, test_patch = split_diff(git(repo_git, "diff", "--binary", "--no-color", "--no-ext-diff", base, commit))
    message = git(repo_git, "log", "-1", "--format=%B", commit).strip()
    created = git(repo_git, "log", "-1", "--format=%cI", commit).strip()
    return {"commit": commit, "base_commit": base, "patch": patch, "test_patch": test_patch,
            "problem_statement": message, "created_at": created}


# ----------------------------------------------------------------------------------------- runs

def run_commands(commands: list[str], cwd: Path, env: dict, echo: bool) -> tuple[str, int]:
    """Run each command with bash in `cwd`; the output of all (with `+ COMMAND` before each when
    `echo`) and the last exit status."""
    out, status = [], 0
    for command in commands:
        if echo:
            out.append(f"+ {command}\n")
        done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=COMMAND_TIMEOUT)
        out.append(done.stdout.decode("utf-8", "replace"))
        status = done.returncode
    return "".join(out), status


def apply(cwd: Path, patch: str) -> None:
    if patch:
        subprocess.run(["git", "apply", "--binary", "-"], cwd=cwd, input=patch.encode(), check=True)


def test_commands(env: dict) -> list[str]:
    cmd = env["test_cmd"]
    return cmd if isinstance(cmd, list) else [cmd]


# SWE-bench's rules for the five parsers these instances name (swebench/harness/log_parsers/*.py),
# restated; used only while codeagent's PARSERS lacks the name (its parsers spell ids the same way).
_LINE_RULES = {
    "gotest": (r"^--- (PASS|FAIL|SKIP): (.+) \((.+)\)$", 2, 1),
    "cargo": (r"^test\s+(\S+)\s+\.\.\.\s+(\w+)$", 1, 2),
    "tap": (r"^(ok|not ok) (\d+) (.+)$", 3, 1),
    "googletest": (r"^.*\[\s*(OK|FAILED)\s*\]\s(.*)\s\(.*\)$", 2, 1),
}
_WORDS = {"PASS": "PASSED", "ok": "PASSED", "OK": "PASSED", "SUCCESS": "PASSED", "FAIL": "FAILED",
          "FAILED": "FAILED", "not ok": "FAILED", "FAILURE": "FAILED", "SKIP": "SKIPPED"}


def _maven(log: str) -> dict[str, str]:
    """One test per `-Dtest=` command line, its status the next BUILD SUCCESS/FAILURE line."""
    found, pending = {}, []
    for line in log.splitlines():
        line = line.strip()
        if named := re.match(r"^.*-Dtest=(\S+).*$", line):
            pending.append(named.group(1))
        if (result := re.match(r"^.*BUILD (SUCCESS|FAILURE)$", line)) and pending:
            found[pending.pop(0)] = _WORDS[result.group(1)]
    return found


def statuses(parser: str, log: str) -> dict[str, str]:
    """{test id: status} of a test log, by the parser the environment names."""
    from codeagent.harness.logs.parsers import PARSERS, parse_log

    if parser in PARSERS:
        return dict(parse_log(parser, log))
    if parser == "maven":
        return _maven(log)
    pattern, name, status = _LINE_RULES[parser]
    found = {}
    for line in log.splitlines():
        if (match := re.match(pattern, line.strip())) and match.group(status) in _WORDS:
            found[match.group(name)] = _WORDS[match.group(status)]
    return found


def run_state(cwd: Path, env: dict, shell_env: dict, runs: int, logs: Path, label: str) -> list[dict[str, str]]:
    found = []
    for number in range(1, runs + 1):
        log, _ = run_commands(env.get("pre_test", []), cwd, shell_env, echo=False)
        test_log, status = run_commands(test_commands(env), cwd, shell_env, echo=True)
        (logs / f"{label}.{number}.log").write_text(log + test_log + f"\n[exit {status}]\n")
        found.append(statuses(env["log_parser"], test_log))
    return found


def classify(before: list[dict], after: list[dict]) -> tuple[list[str], list[str], list[str]]:
    """(FAIL_TO_PASS, PASS_TO_PASS, flaky) from the runs of each state, in the order the tests
    appear after the patch."""
    names = list(dict.fromkeys(name for run in after + before for name in run))
    f2p, p2p, flaky = [], [], []
    for name in names:
        was = {run.get(name) == "PASSED" for run in before}
        now = {run.get(name) == "PASSED" for run in after}
        if len(was) > 1 or len(now) > 1:
            flaky.append(name)
        elif now == {True}:
            (p2p if was == {True} else f2p).append(name)
    return f2p, p2p, flaky


def measure(repo_git: Path, source: dict, described: dict, runs: int, work: Path) -> dict:
    env = source["environment"]
    shell_env = {**os.environ, **HOST_ENV.get(env["language"], {}), **env.get("env", {}), **env.get("test_env", {})}
    if env["language"] == "rust":  # one build folder per repository: dependencies compiled once
        shell_env["CARGO_TARGET_DIR"] = str(work / "cargo-target" / source["repo"].replace("/", "+"))
    logs = work / "logs" / source["instance_id"]
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    scratch = Path(tempfile.mkdtemp(prefix=source["instance_id"] + "-", dir=work))
    try:
        subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(repo_git), str(scratch)], check=True)
        subprocess.run(["git", "checkout", "-q", described["base_commit"]], cwd=scratch, check=True)
        started = time.monotonic()
        log, status = run_commands([*env.get("pre_install", []), *env.get("install", [])], scratch, shell_env,
                                   echo=True)
        (logs / "install.log").write_text(log + f"\n[exit {status}]\n")
        apply(scratch, described["test_patch"])
        before = run_state(scratch, env, shell_env, runs, logs, "before")
        apply(scratch, described["patch"])
        after = run_state(scratch, env, shell_env, runs, logs, "after")
        seconds = round(time.monotonic() - started, 1)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    f2p, p2p, flaky = classify(before, after)
    return {"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p, "flaky": flaky, "seconds": seconds,
            "tests_before": [len(run) for run in before], "tests_after": [len(run) for run in after]}


# ----------------------------------------------------------------------------------------- rows

def row(source: dict, described: dict, measured: dict) -> dict:
    number = source["number"]
    if source["official"]:
        origin = (f"SWE-bench Multilingual instance {source['instance_id']}, rebuilt from the history of "
                  f"https://github.com/{source['repo']}: pull request #{number}, merged as {described['commit']}")
    else:
        origin = (f"real fix with tests: pull request #{number} of https://github.com/{source['repo']}, "
                  f"merged as {described['commit']}")
    return {
        "repo": source["repo"], "instance_id": source["instance_id"], "base_commit": described["base_commit"],
        "patch": described["patch"], "test_patch": described["test_patch"],
        "problem_statement": described["problem_statement"], "hints_text": "",
        "created_at": described["created_at"], "version": str(number),
        "FAIL_TO_PASS": measured["FAIL_TO_PASS"], "PASS_TO_PASS": measured["PASS_TO_PASS"],
        "environment": source["environment"], "source": origin,
    }


def layout(mirrors: Path, sources: list[dict], into: Path) -> None:
    for repo in dict.fromkeys(source["repo"] for source in sources):
        link = into / repo
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(git_dir(mirrors, repo).resolve())
        print(f"{link} -> {link.resolve()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, required=True, help="where the repositories' git directories are")
    parser.add_argument("--sources", type=Path, default=SOURCES)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "codeagent-multilingual")
    parser.add_argument("--only", help="comma-separated instance ids (the output keeps the others' kept results)")
    parser.add_argument("--runs", type=int, default=2, help="runs of each state (a test that differs is flaky)")
    parser.add_argument("--rerun", action="store_true", help="measure again the selected instances")
    parser.add_argument("--no-run", action="store_true", help="write the file from the kept results; run nothing")
    parser.add_argument("--layout", type=Path, help="only make DIR/owner/name links for `eval grade --repos DIR`")
    args = parser.parse_args()

    sources = load_sources(args.sources)
    if args.layout:
        layout(args.mirrors, sources, args.layout)
        return
    wanted = set(args.only.split(",")) if args.only else None
    results = args.work / "results"
    results.mkdir(parents=True, exist_ok=True)
    rows = []
    for source in sources:
        kept = results / f"{source['instance_id']}.json"
        selected = wanted is None or source["instance_id"] in wanted
        if selected and not args.no_run and (args.rerun or not kept.is_file()):
            repo_git = git_dir(args.mirrors, source["repo"])
            described = describe(repo_git, source)
            print(f"{source['instance_id']}: running its tests ({args.runs} runs before, {args.runs} after)",
                  file=sys.stderr, flush=True)
            try:
                measured = measure(repo_git, source, described, args.runs, args.work)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
                measured = {"error": str(error)[:500]}
            kept.write_text(json.dumps({"described": described, "measured": measured}, indent=1))
        if not kept.is_file():
            continue
        record = json.loads(kept.read_text())
        measured = record["measured"]
        line = (f"{source['instance_id']}: " + (f"error {measured['error']}" if "error" in measured else
                f"F2P {len(measured['FAIL_TO_PASS'])}, P2P {len(measured['PASS_TO_PASS'])}, "
                f"flaky {len(measured['flaky'])}, {measured['seconds']} s"))
        print(line, file=sys.stderr)
        if measured.get("FAIL_TO_PASS"):
            rows.append(row(source, record["described"], measured))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{len(rows)} instances -> {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
