"""Headless `codeagent solve`: launch -> first model request, and launch -> exit, on a warm image.

A local OpenAI-compatible server (this process) answers with one plain reply (the run ends `answered`) and
records when the first chat request arrives. The baseline is another checkout of codeagent (default: the
main branch's tree at /work/main, or --baseline PATH), run side by side, alternating, in the same run.
Target: first model request within 2 s of launch. Also checks that no container of the run is left.
`--model` picks the route: the default (a name with no litellm price at an api_base) is a self-hosted
server's, whose first request goes out before litellm is imported; a priced name (openai/gpt-4o-mini, the
server answering to it) takes a hosted provider's route, which waits for litellm's import.
Usage: python bench/solve_startup.py [--runs 5] [--baseline /path/to/other/checkout] [--model openai/NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from _common import scratch_repo

HERE = Path(__file__).resolve().parents[1]


class FakeOpenAI(BaseHTTPRequestHandler):
    """GET /v1/models and a streamed POST /v1/chat/completions: one plain reply, no tool call."""

    arrivals: list[float] = []
    serves = "bench"

    def do_GET(self):
        self._send(200, json.dumps({"object": "list", "data": [{"id": FakeOpenAI.serves, "owned_by": "bench"}]}).encode(),
                   "application/json")

    def do_POST(self):
        FakeOpenAI.arrivals.append(time.perf_counter())
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "bench",
                 "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Nothing to change."},
                              "finish_reason": "stop"}]}
        usage = {**chunk, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}}
        body = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode()
        self._send(200, body, "text/event-stream")

    def _send(self, status, body, kind):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def one_run(tree: Path, repo: Path, api_base: str, env: dict, model: str, *flags: str) -> tuple[float, float, float]:
    """(seconds to the first model request, seconds to exit, CPU seconds of the whole process) of one headless
    solve from `tree` (`flags`: more of solve's options). The CPU figure is steadier than wall times on a
    loaded machine."""
    FakeOpenAI.arrivals.clear()
    command = [sys.executable, "-m", "codeagent.cli", "solve", "--headless", "--repo", str(repo), "--issue",
               "say hello", "--model", model, "--api-base", api_base, "--set", "agent.localize=false", *flags]
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env={**env, "PYTHONPATH": str(tree)}, cwd=repo)
    ended = time.perf_counter()
    if proc.returncode != 0 or not FakeOpenAI.arrivals:
        raise SystemExit(f"{tree}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime
    return FakeOpenAI.arrivals[0] - start, ended - start, cpu


def run_containers(label: str) -> list[str]:
    """Containers (any state) of this benchmark's runs: each run's sandboxes carry its run label."""
    return subprocess.run(["docker", "ps", "-aq", "--filter", f"label=codeagent.run={label}"],
                          capture_output=True, text=True).stdout.split()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", type=Path, default=Path("/work/main"),
                        help="another codeagent checkout to compare with (its code is run as it is)")
    parser.add_argument("--model", default="openai/bench", help="openai/NAME: the server answers to NAME")
    args = parser.parse_args()
    FakeOpenAI.serves = args.model.split("/", 1)[1]
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api_base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    repo, scratch = scratch_repo(50), Path(tempfile.mkdtemp(prefix="codeagent-bench-home-"))
    env = {key: value for key, value in os.environ.items() if not key.endswith("_API_KEY")} | {
        "CODEAGENT_TRAJECTORY_DIR": str(scratch / "trajs"), "CODEAGENT_CONFIG": str(scratch / "none.yaml"),
        "CODEAGENT_RUN_LABEL": f"bench-startup-{os.getpid()}"}
    trees = {"this tree": HERE, "baseline": args.baseline.resolve()}
    times: dict[str, list[tuple[float, float, float]]] = {name: [] for name in trees}
    for tree in trees.values():  # bytecode, as an installed package has it (not compiled at each launch)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "codeagent")], check=True,
                       env={key: value for key, value in env.items() if key != "PYTHONDONTWRITEBYTECODE"})
    try:
        for tree in trees.values():  # warm: the workspace image and the file cache
            one_run(tree, repo, api_base, env, args.model)
        for run in range(args.runs):
            for name, tree in (trees.items() if run % 2 == 0 else reversed(trees.items())):
                times[name].append(one_run(tree, repo, api_base, env, args.model))
        time.sleep(5)  # a teardown left to the background has had its time
        left = run_containers(env["CODEAGENT_RUN_LABEL"])
    finally:
        server.shutdown()
        shutil.rmtree(repo, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"headless solve ({args.model}) on a warm image, {args.runs} runs each, alternating; load {os.getloadavg()[0]:.1f}")
    medians = {}
    for name, values in times.items():
        first, total, cpu = (statistics.median(value[index] for value in values) for index in (0, 1, 2))
        medians[name] = first, total, cpu
        print(f"  {name:10s} launch->first model request p50 {first:6.2f} s   launch->exit p50 {total:6.2f} s   "
              f"CPU of the run p50 {cpu:6.2f} s   ({trees[name]})")
    (base_first, base_total, base_cpu), (first, total, cpu) = medians["baseline"], medians["this tree"]
    print(f"  ratio baseline/this: first request {base_first / first:.2f}x, exit {base_total / total:.2f}x, "
          f"CPU {base_cpu / cpu:.2f}x "
          f"(target: first request <= 2 s: {'met' if first <= 2 else 'NOT met'})")
    print(f"  containers of the runs left after 5 s: {len(left)}")


if __name__ == "__main__":
    main()
