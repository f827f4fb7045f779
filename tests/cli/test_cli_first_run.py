"""A new user's first commands: `codeagent` alone takes solve's flags, `codeagent doctor` says what to
fix, and `pip install .` in a fresh virtualenv gives a working `codeagent`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from codeagent.run.examples import example_repo

ROOT = Path(__file__).parent.resolve().parents[1]


def codeagent(*args: str, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codeagent.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


@pytest.fixture
def env(tmp_path):
    return {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"} | {
        "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "trajs"), "CODEAGENT_CONFIG": str(tmp_path / "none.yaml")}


def test_codeagent_alone_takes_the_solve_flags(tmp_path, env):
    clone = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(example_repo("cart")), str(clone)], check=True)
    proc = codeagent("--repo", str(clone), "--issue", "fix remove()", "--headless", "--set", "limits.max_steps=2",
                     "--model", "openai/gpt-4o", env=env)
    assert proc.returncode == 3 and "needs OPENAI_API_KEY" in proc.stderr, proc.stderr  # solve ran, found no key
    proc = codeagent("--example", "cart", "--json", "--set", "limits.max_steps=2", env=env)
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 4 and events[-1]["exit_status"] == "max_steps", proc.stderr
    proc = codeagent("--headless", "eval", "--help", env=env)
    assert proc.returncode == 2 and "--headless: solve's options go after `codeagent solve`" in proc.stderr
    assert "Commands:" in codeagent(env=env).stdout  # no flag and no terminal: the help, as before


class ModelList(BaseHTTPRequestHandler):
    """An OpenAI-compatible server's GET /v1/models (all `doctor` asks of it); records the requests."""

    seen: list[str] = []

    def do_GET(self):
        ModelList.seen.append(self.path)
        body = b'{"object": "list", "data": [{"id": "served"}]}'
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def model_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), ModelList)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_doctor_says_what_is_ready_and_what_to_fix(tmp_path, env, base_image, model_server):
    clone = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(example_repo("cart")), str(clone)], check=True)
    proc = codeagent("doctor", "--json", "--model", "hosted_vllm/served", "--api-base", model_server, env=env, cwd=clone)
    found = json.loads(proc.stdout)
    statuses = {check["name"]: check["status"] for check in found["checks"]}
    # the disk check reads this machine's free space (under 10 GiB warns), which the test does not control
    disk = statuses.pop("disk")
    assert disk in ("ok", "warn")
    assert proc.returncode == (0 if disk == "ok" else 1) and found["ok"] == (disk == "ok"), proc.stdout
    assert statuses == {"docker": "ok", "base image": "ok", "model": "ok", "model server": "ok", "git": "ok"}
    assert ModelList.seen == ["/v1/models"]  # one cheap request, nothing generated

    (clone / "shop" / "cart.py").write_text("# my edit\n")
    (tmp_path / "config.yaml").write_text("model:\n  name: hosted_vllm/served\n  api_base: http://127.0.0.1:9/v1\n")
    proc = codeagent("doctor", env={**env, "CODEAGENT_CONFIG": str(tmp_path / "config.yaml")}, cwd=clone)
    assert proc.returncode == 1, proc.stdout
    lines = proc.stdout.splitlines()
    server = next(index for index, line in enumerate(lines) if line.startswith("fail  model server"))
    assert "cannot reach http://127.0.0.1:9/v1/models" in lines[server] and "start the server" in lines[server + 1]
    assert "connection refused" in lines[server] and "within" not in lines[server]  # not worded as a timeout
    assert any(line.startswith("warn  git") and "1 uncommitted change" in line for line in lines)

    no_engine = {**env, "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    proc = codeagent("doctor", "--json", env=no_engine, cwd=tmp_path)  # no engine, no model, not a repository
    checks = {check["name"]: check for check in json.loads(proc.stdout)["checks"]}
    assert checks["docker"]["status"] == "fail" and "No Docker engine answers" in checks["docker"]["detail"]
    assert "systemctl start docker" in checks["docker"]["fix"] and checks["base image"]["status"] == "fail"
    assert proc.returncode == 1 and checks["model"]["status"] == "fail" and "--model" in checks["model"]["fix"]
    assert checks["git"]["status"] == "ok" and "not a git repository: solve works" in checks["git"]["detail"]

    proc = codeagent("doctor", "--json", "--model", "openai/served", "--api-base", model_server, env=env, cwd=clone)
    checks = {check["name"]: check for check in json.loads(proc.stdout)["checks"]}
    assert "its runs record no token ids" in checks["model server"]["detail"]  # said here, not at every run


def readme_block(after: str, language: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"```{language}\n", text.index(after)) + len(language) + 4
    return text[start:text.index("```", start)]


def test_the_readme_config_sample_is_what_doctor_reads(tmp_path, env):
    config = tmp_path / "config.yaml"
    config.write_text(readme_block("## Quick start", "yaml"))
    proc = codeagent("doctor", "--json", env={**env, "CODEAGENT_CONFIG": str(config)}, cwd=tmp_path)
    model = next(check for check in json.loads(proc.stdout)["checks"] if check["name"] == "model")
    assert model["status"] == "fail" and "'openai/gpt-4o' needs OPENAI_API_KEY" in model["detail"], model
    assert model["fix"].startswith("export OPENAI_API_KEY=")


@pytest.mark.slow
def test_pip_install_in_a_fresh_virtualenv_gives_a_working_codeagent(tmp_path):
    """What the quick start's `pipx install .` does: the package and its assets from a checkout."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(ROOT)], capture_output=True, text=True,
                             timeout=900)
    assert install.returncode == 0, install.stderr[-2000:]
    clean = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run([str(venv / "bin" / "codeagent"), "--help"], capture_output=True, text=True, env=clean,
                          cwd=tmp_path)
    assert proc.returncode == 0 and "doctor" in proc.stdout and "--issue" in proc.stdout, proc.stderr
    proc = subprocess.run([str(venv / "bin" / "codeagent"), "doctor", "--json"], capture_output=True, text=True,
                          env={**clean, "CODEAGENT_CONFIG": str(tmp_path / "none.yaml")}, cwd=tmp_path)
    assert {check["name"] for check in json.loads(proc.stdout)["checks"]} >= {"docker", "model", "git", "disk"}
