"""Shared fixtures. Docker tests use the real engine: without one they fail, they do not skip."""

from __future__ import annotations

import gzip
import json
import os
import signal
import uuid
from pathlib import Path

import pytest

from tests.support.calc import calc_task
from tests.support.checkout import latin1_checkout
from tests.support.docker import images_of_this_run, leaked_containers, sandbox_containers
from tests.support.fake_server import FakeServer
from tests.support.git import git
from tests.support.prebuilt import local_registry


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


@pytest.fixture
def repo(make_repo, tmp_path, monkeypatch):
    """A one-file repository, with a cache of its own for the sandbox's images; a test module may define its
    own `repo`."""
    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))
    return make_repo({"main.py": "print('hi')\n"})


@pytest.fixture(scope="session")
def lite_raw() -> dict[str, list[dict]]:
    """The shipped SWE-bench Lite splits as stored: the 12 official fields, test lists JSON-encoded."""
    from codeagent.assets import asset_path

    def read(split: str) -> list[dict]:
        data = gzip.decompress(asset_path("evals", "swebench", f"lite.{split}.jsonl.gz").read_bytes())
        return [json.loads(line) for line in data.decode("utf-8").splitlines()]

    return {"test": read("test"), "dev": read("dev")}


@pytest.fixture(scope="module")
def task(tmp_path_factory, base_image):
    """The synthetic calc task (tests/support/calc.py) in a repository of the module's own."""
    return calc_task(tmp_path_factory.mktemp("synthetic"))


@pytest.fixture
def checkout(tmp_path):
    """A git checkout with a Latin-1 file (tests/support/checkout.py); a test module may define its own."""
    return latin1_checkout(tmp_path)


@pytest.fixture
def env(tmp_path):
    """The environment of a CLI a test starts: its own trajectories, no user config, no OpenAI key (a test
    module may define its own)."""
    environment = {**os.environ, "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "trajs"),
                   "CODEAGENT_CONFIG": str(tmp_path / "no-user-config.yaml")}
    environment.pop("OPENAI_API_KEY", None)
    return environment


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """host:port of a fresh local image registry (tests/support/prebuilt.py)."""
    with local_registry(tmp_path_factory.mktemp("registry")) as address:
        yield address


@pytest.fixture
def server(monkeypatch):
    """A scripted OpenAI-compatible server on localhost (tests/support/fake_server.py); a test module may
    define its own `server` instead."""
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


@pytest.fixture
def no_leaks(base_image):
    """Fails the test if it leaves a sandbox container behind."""
    before = sandbox_containers()
    yield
    leaked = leaked_containers(before)
    assert not leaked, f"{len(leaked)} sandbox container(s) leaked"
