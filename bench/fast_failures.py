"""Headless `codeagent solve`, two fast paths, this tree against a baseline checkout side by side, alternating:

1. A refused model server (`--api-base` at a port nobody listens on): launch -> the error line on stderr, and
   launch -> exit (aim: within 1 s of launch).
2. A fast local server's first reply: the server (this process) waits `--think` seconds (the sandbox is ready
   by then, as with a real model's first reply) and streams one plain reply (the run ends `answered`). From the
   moment its last byte was written: -> the reply's text on stderr (the progress), -> the answer on stdout
   (this tree; the baseline prints none there), -> exit; and in a second run with --json, -> its
   `model_output` event on stdout (aim: the reply printed within 0.5 s of its arrival).

The model name has no litellm price (a self-hosted server's route). Output is read from the pipes by threads
that stamp each read. Usage: python bench/fast_failures.py [--runs 5] [--baseline PATH] [--think 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
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
ANSWER = "The first item is skipped because the loop starts at 1."
MODEL = "openai/bench-local"


class Server(BaseHTTPRequestHandler):
    """GET /v1/models; POST /v1/chat/completions: after `think` seconds one streamed plain reply."""

    think = 3.0
    sent: list[float] = []

    def do_GET(self):
        self._send(json.dumps({"object": "list", "data": [{"id": MODEL.split("/", 1)[1], "owned_by": "me"}]}).encode(),
                   "application/json")

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        time.sleep(Server.think)
        base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "bench-local"}
        chunk = {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ANSWER},
                                      "finish_reason": "stop"}]}
        usage = {**base, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22}}
        self._send(f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode(),
                   "text/event-stream")
        Server.sent.append(time.perf_counter())

    def _send(self, body, kind):
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def log_message(self, *args):
        pass


class Stamped:
    """A pipe read by a thread; `when(text)`: the time the output first held `text` (None: never)."""

    def __init__(self, pipe):
        self.reads: list[tuple[float, bytes]] = []
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe):
        while chunk := os.read(pipe.fileno(), 65536):
            self.reads.append((time.perf_counter(), chunk))

    def join(self):
        self._thread.join(10)

    def when(self, text: str) -> float | None:
        seen = b""
        for stamp, chunk in self.reads:
            seen += chunk
            if text.encode() in seen:
                return stamp
        return None

    def text(self) -> str:
        return b"".join(chunk for _, chunk in self.reads).decode("utf-8", "replace")


def one_run(tree: Path, repo: Path, api_base: str, env: dict, *flags: str) -> dict:
    command = [sys.executable, "-m", "codeagent.cli", "solve", "--headless", "--repo", str(repo), "--issue",
               "why is the first item skipped?", "--model", MODEL, "--api-base", api_base,
               "--set", "agent.localize=false", *flags]
    Server.sent.clear()
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env={**env, "PYTHONPATH": str(tree)}, cwd=repo)
    out, err = Stamped(proc.stdout), Stamped(proc.stderr)
    code = proc.wait(timeout=300)
    ended = time.perf_counter()
    out.join()
    err.join()
    return {"start": start, "ended": ended, "code": code, "out": out, "err": err}


def refused(tree: Path, repo: Path, port: int, env: dict) -> tuple[float, float]:
    run = one_run(tree, repo, f"http://127.0.0.1:{port}/v1", env)
    said = run["err"].when("cannot connect")
    if run["code"] != 5 or said is None:
        raise SystemExit(f"{tree}: exit {run['code']}\n{run['err'].text()[-2000:]}")
    return said - run["start"], run["ended"] - run["start"]


def first_reply(tree: Path, repo: Path, api_base: str, env: dict) -> tuple[float, float | None, float, float]:
    """Seconds from the reply's last byte to: its text on stderr, the answer on stdout (None: never), the
    exit; and with --json, to its model_output event on stdout."""
    run = one_run(tree, repo, api_base, env)
    if run["code"] != 0 or not Server.sent:
        raise SystemExit(f"{tree}: exit {run['code']}\n{run['err'].text()[-2000:]}")
    sent = Server.sent[0]
    on_err, on_out = run["err"].when(ANSWER), run["out"].when(ANSWER)
    if on_err is None:
        raise SystemExit(f"{tree}: the reply was never printed\n{run['err'].text()[-2000:]}")
    as_json = one_run(tree, repo, api_base, env, "--json")
    event = as_json["out"].when('"kind": "model_output"')
    if as_json["code"] != 0 or event is None:
        raise SystemExit(f"{tree}: --json: exit {as_json['code']}\n{as_json['err'].text()[-2000:]}")
    return (on_err - sent, (on_out - sent) if on_out is not None else None, run["ended"] - sent,
            event - Server.sent[0])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", type=Path, default=Path("/work/main"),
                        help="another codeagent checkout to compare with (its code is run as it is)")
    parser.add_argument("--think", type=float, default=3.0, help="seconds the server waits before its reply")
    args = parser.parse_args()
    Server.think = args.think
    server = ThreadingHTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api_base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    repo, scratch = scratch_repo(50), Path(tempfile.mkdtemp(prefix="codeagent-bench-home-"))
    env = {key: value for key, value in os.environ.items() if not key.endswith("_API_KEY")} | {
        "CODEAGENT_TRAJECTORY_DIR": str(scratch / "trajs"), "CODEAGENT_CONFIG": str(scratch / "none.yaml"),
        "CODEAGENT_RUN_LABEL": f"bench-fast-{os.getpid()}"}
    trees = {"this tree": HERE, "baseline": args.baseline.resolve()}
    for tree in trees.values():  # bytecode, as an installed package has it
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "codeagent")], check=True)
    refusals: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    replies: dict[str, list[tuple[float, float | None, float, float]]] = {name: [] for name in trees}
    loads = []
    try:
        for tree in trees.values():  # warm: the workspace image and the file cache
            first_reply(tree, repo, api_base, env)
        for run in range(args.runs):
            order = list(trees.items()) if run % 2 == 0 else list(reversed(trees.items()))
            for name, tree in order:
                loads.append(os.getloadavg()[0])
                refusals[name].append(refused(tree, repo, free_port(), env))
                replies[name].append(first_reply(tree, repo, api_base, env))
    finally:
        server.shutdown()
        shutil.rmtree(repo, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"headless solve ({MODEL}), {args.runs} runs each, alternating; load {min(loads):.1f}-{max(loads):.1f}")
    p50 = statistics.median
    medians = {}
    for name in trees:
        said, ended = (p50(value[index] for value in refusals[name]) for index in (0, 1))
        on_err, ended_reply, on_json = (p50(value[index] for value in replies[name]) for index in (0, 2, 3))
        outs = [value[1] for value in replies[name] if value[1] is not None]
        shown = f"p50 {p50(outs):5.2f} s" if outs else "  (none)  "
        medians[name] = said, on_json, ended_reply
        print(f"  {name:10s} refused server: launch->error p50 {said:5.2f} s, launch->exit p50 {ended:5.2f} s | "
              f"reply arrived->on stderr p50 {on_err:5.2f} s, ->on stdout "
              f"{shown}, ->exit p50 {ended_reply:5.2f} s, "
              f"--json: ->model_output p50 {on_json:5.2f} s   ({trees[name]})")
    (base_said, base_json, base_exit), (said, on_json, ended_reply) = medians["baseline"], medians["this tree"]
    print(f"  ratio baseline/this: refused server reported {base_said / said:.2f}x, --json model_output "
          f"{base_json / on_json:.2f}x, exit after the reply {base_exit / ended_reply:.2f}x")
    print(f"  aims: refused server within 1 s of launch: {'met' if said <= 1 else 'NOT met'} ({said:.2f} s); "
          f"first reply printed (--json model_output) within 0.5 s of its arrival: "
          f"{'met' if on_json <= 0.5 else 'NOT met'} ({on_json:.2f} s)")


if __name__ == "__main__":
    main()
