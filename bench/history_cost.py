"""What the repository's history in `solve`'s sandbox (run/history.py) costs the start: launch -> first model
request of a headless solve of this tree with `agent.repository_history` true and false, alternating, in the
same run (the server and the repository of bench/solve_startup.py; `--commits N` gives the repository N
commits). Usage: python bench/history_cost.py [--runs 5] [--commits 200]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

from _common import GIT_ENV, scratch_repo
from solve_startup import HERE, FakeOpenAI, one_run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--commits", type=int, default=200)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api_base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    repo, scratch = scratch_repo(50), Path(tempfile.mkdtemp(prefix="codeagent-bench-home-"))
    for number in range(args.commits):  # a history to copy
        (repo / "history.txt").write_text(f"{number}\n")
        subprocess.run(["git", "commit", "-qam", f"change {number}"] if number else
                       ["sh", "-c", "git add history.txt && git commit -qm 'change 0'"], cwd=repo, env=GIT_ENV, check=True)
    env = {key: value for key, value in os.environ.items() if not key.endswith("_API_KEY")} | {
        "CODEAGENT_TRAJECTORY_DIR": str(scratch / "trajs"), "CODEAGENT_CONFIG": str(scratch / "none.yaml"),
        "CODEAGENT_RUN_LABEL": f"bench-history-{os.getpid()}"}
    times: dict[str, list[float]] = {"true": [], "false": []}
    try:
        for setting in times:  # warm
            one_run(HERE, repo, api_base, env, "openai/bench", "--set", f"agent.repository_history={setting}")
        for run in range(args.runs):
            for setting in (("true", "false") if run % 2 == 0 else ("false", "true")):
                first, _, _ = one_run(HERE, repo, api_base, env, "openai/bench", "--set",
                                      f"agent.repository_history={setting}")
                times[setting].append(first)
    finally:
        server.shutdown()
        shutil.rmtree(repo, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    given, sealed = statistics.median(times["true"]), statistics.median(times["false"])
    print(f"headless solve, {args.commits + 1} commits, {args.runs} runs each, alternating; load {os.getloadavg()[0]:.1f}")
    print(f"  history given   launch->first model request p50 {given:5.2f} s")
    print(f"  history sealed  launch->first model request p50 {sealed:5.2f} s")
    print(f"  cost of the history: {given - sealed:+.2f} s ({given / sealed:.2f}x)")


if __name__ == "__main__":
    main()
