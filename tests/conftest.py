"""Shared fixtures. Docker tests use the real engine: without one they fail, they do not skip."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout


@pytest.fixture
def make_repo(tmp_path):
    """make_repo({"path": "content" | bytes}) -> a git repo with one commit of those files."""
    counter = {"n": 0}

    def make(files: dict[str, str | bytes], name: str | None = None) -> Path:
        counter["n"] += 1
        repo = tmp_path / (name or f"repo{counter['n']}")
        repo.mkdir()
        for rel, content in files.items():
            path = repo / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "initial")
        return repo

    return make


@pytest.fixture(scope="session")
def lite_raw() -> dict[str, list[dict]]:
    """The shipped SWE-bench Lite splits as stored: the 12 official fields, test lists JSON-encoded."""
    from codeagent.assets import asset_path

    def read(split: str) -> list[dict]:
        data = gzip.decompress(asset_path("evals", "swebench", f"lite.{split}.jsonl.gz").read_bytes())
        return [json.loads(line) for line in data.decode("utf-8").splitlines()]

    return {"test": read("test"), "dev": read("dev")}


@pytest.fixture
def server(monkeypatch):
    """A scripted OpenAI-compatible server on localhost (tests/test_models_litellm.py FakeServer); a test
    module may define its own `server` instead."""
    from tests.test_models_litellm import FakeServer

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake = FakeServer()
    yield fake
    fake.close()


def pytest_configure(config):
    # Workspace images built during this run (here or in a CLI the tests start) carry this label,
    # so that teardown removes those and not the images of a codeagent run going on beside.
    from codeagent.sandbox.docker import RUN_LABEL_ENV

    os.environ[RUN_LABEL_ENV] = f"pytest-{uuid.uuid4().hex[:12]}"
    # The Ctrl-C tests need SIGINT to interrupt, here and in the CLIs they start. A shell without job
    # control starts a background job (`bash .ci/run &`) with SIGINT ignored, and children inherit that:
    # every Ctrl-C test then failed (measured). Restored here, so the children exec with the default.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def images_of_this_run(client) -> list:
    from codeagent.sandbox.docker import RUN_LABEL, RUN_LABEL_ENV, WORKSPACE_IMAGE

    return client.images.list(name=WORKSPACE_IMAGE, filters={"label": f"{RUN_LABEL}={os.environ[RUN_LABEL_ENV]}"})


@pytest.fixture(scope="session")
def base_image():
    from docker.errors import APIError

    from codeagent.sandbox.engine import docker_client
    from codeagent.sandbox.images import build_base_image

    client = docker_client()
    yield build_base_image(log=lambda line: None)
    for image in images_of_this_run(client):  # the tests' throwaway repositories
        try:
            client.images.remove(image.id, force=True)
        except APIError as exc:  # gone already, or a container outside the tests runs on it: keep it
            if exc.status_code not in (404, 409):
                raise


def sandbox_containers() -> set[str]:
    from codeagent.sandbox.docker import LABEL
    from codeagent.sandbox.engine import docker_client

    return {c.id for c in docker_client().containers.list(all=True, filters={"label": LABEL}, ignore_removed=True)}


def leaked_containers(before: set[str]) -> set[str]:
    """New sandbox containers of this test run owned by this process or by a process that has died (a
    CLI the test ran). Containers of other live processes, such as a benchmark running beside, or of
    other test runs on the same engine are not ours."""
    import socket

    from codeagent.sandbox.docker import LABEL, RUN_LABEL, RUN_LABEL_ENV
    from codeagent.sandbox.engine import docker_client
    from codeagent.sandbox.prune import owner_alive

    me = f"{socket.gethostname()}:{os.getpid()}"
    leaked = set()
    ours = f"{RUN_LABEL}={os.environ[RUN_LABEL_ENV]}"
    for container in docker_client().containers.list(all=True, filters={"label": [LABEL, ours]}, ignore_removed=True):
        owner = container.labels.get("codeagent.owner", "")
        if container.id not in before and owner and (owner == me or not owner_alive(owner)):
            leaked.add(container.id)
    return leaked


@pytest.fixture
def no_leaks(base_image):
    """Fails the test if it leaves a sandbox container behind."""
    before = sandbox_containers()
    yield
    leaked = leaked_containers(before)
    assert not leaked, f"{len(leaked)} sandbox container(s) leaked"
