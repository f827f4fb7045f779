"""Fast failures (issue 38, item 4): a refused model server is told before any sandbox work, before httpx,
litellm or the sandbox's modules are imported; a fast local server's first reply is not kept waiting for
litellm's import; a model name is matched the way the server matches it (Ollama's `qwen3` is `qwen3:latest`)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from codeagent.models import LiteLLMModel, ModelConfigError, Sampling, first_request, litellm_model
from tests.support.fake_server import MESSAGES, Streamed, chunks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_refused_server_is_told_before_any_sandbox_work_or_heavy_import(repo, env, tmp_path):
    """The line naming host:port, exit 5, and at that moment neither the working tree's snapshot nor the
    sandbox's start was begun, and neither litellm nor httpx nor the sandbox's modules were imported."""
    probe = ("import atexit, sys\n"
             "atexit.register(lambda: print('imported:', sorted(name for name in ('litellm', 'httpx', "
             "'codeagent.sandbox.docker', 'codeagent.agent.loop') if name in sys.modules), file=sys.stderr))\n"
             "from codeagent.cli import main\nmain()\n")
    (tmp_path / "launch.py").write_text(probe)
    proc = subprocess.run([sys.executable, str(tmp_path / "launch.py"), "solve", "--headless", "--repo", str(repo),
                           "--issue", "why?", "--model", "openai/qwen3", "--api-base",
                           f"http://127.0.0.1:{free_port()}/v1"],
                          capture_output=True, text=True, env={**env, "PYTHONPATH": ROOT}, timeout=60)
    assert proc.returncode == 5, proc.stderr
    assert "cannot connect to 127.0.0.1:" in proc.stderr
    assert "started from the working tree" not in proc.stderr and "preparing" not in proc.stderr
    assert "imported: []" in proc.stderr, proc.stderr
    assert not (tmp_path / "trajs").exists()


def test_the_first_reply_is_not_kept_waiting_for_litellms_import(server, monkeypatch):
    """litellm's import is held (a loaded machine takes seconds): the light first request's reply comes
    back whole all the same, built without litellm."""
    gate = threading.Event()
    monkeypatch.setattr(litellm_model, "_LOADER", first_request.Loader(lambda: gate.wait(30) and None))
    server.replies.append(Streamed(chunks(["The loop ", "starts at 1."])))
    model = LiteLLMModel("openai/test-model", api_base=server.base, retries=0)
    model.start_light()
    done: list = []
    worker = threading.Thread(target=lambda: done.append(model.complete(MESSAGES, [], Sampling())), daemon=True)
    worker.start()
    worker.join(20)
    held = not gate.is_set()
    gate.set()
    assert held and done, "the reply waited for litellm's import"
    assert done[0].content == "The loop starts at 1." and done[0].usage.completion_tokens == 30
    assert done[0].usage.cost is None and done[0].format_error is None


@pytest.mark.parametrize("listed, wanted, served", [
    (["qwen3:latest"], "qwen3", True), (["qwen3:latest"], "Qwen3:latest", True),
    (["library/qwen3:latest"], "qwen3", True), (["qwen3:8b"], "qwen3", False), (["qwen3:latest"], "qwen3:8b", False),
    (["Qwen/Qwen3-8B"], "Qwen/Qwen3-8B", True), (["Qwen/Qwen3-8B"], "Qwen3-8B", False),
    (["user/model:v1"], "user/model:v1", True), (["llama3"], "llama3:latest", True)])
def test_names_are_matched_as_the_server_matches_them(listed, wanted, served):
    from codeagent.models.server_check import serves

    assert serves(listed, wanted) is served


class Listing(BaseHTTPRequestHandler):
    names: list[str] = []

    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": name, "object": "model", "owned_by": "library"}
                                                      for name in Listing.names]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_an_ollama_tag_is_accepted_and_a_name_it_lacks_refused():
    Listing.names = ["qwen3:latest", "llama3.2:3b"]
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Listing)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_port}/v1"
    try:
        LiteLLMModel("openai/qwen3", api_base=base).probe()  # Ollama serves it as qwen3:latest
        with pytest.raises(ModelConfigError, match="does not serve 'llama3.2'; it serves qwen3:latest"):
            LiteLLMModel("openai/llama3.2", api_base=base).probe()
    finally:
        httpd.shutdown()
        httpd.server_close()
