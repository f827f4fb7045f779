"""A local registry (Debian's docker-registry on 127.0.0.1) and small stand-in images in the layouts
of the official SWE-bench images, SWE-smith's and R2E-Gym's, pushed under the names those projects use."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import tarfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.calc import CALC_BUGGY, CALC_FIXED
from tests.support.processes import free_port

FIX = """diff --git a/calc.py b/calc.py
--- a/calc.py
+++ b/calc.py
@@ -1,5 +1,5 @@
 def add(a, b):
-    return a - b
+    return a + b
 
 
 def sub(a, b):
"""
BUG = FIX.replace("-    return a - b\n+    return a + b", "-    return a + b\n+    return a - b")
TESTS = "from calc import add, sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
# The official flow must activate the env: the stand-in `conda activate` sets CONDA_PREFIX.
ENV_TEST = ("import os\n\n\ndef test_env_is_activated():\n"
            "    assert os.environ.get('CONDA_PREFIX') == '/opt/miniconda3/envs/testbed'\n\n\n")
TEST_PATCH = """diff --git a/tests/test_calc.py b/tests/test_calc.py
--- a/tests/test_calc.py
+++ b/tests/test_calc.py
@@ -4,3 +4,7 @@ from calc import add, sub
 
 def test_sub():
     assert sub(5, 3) == 2
+
+
+def test_add():
+    assert add(2, 3) == 5
"""
# A stand-in for miniconda: `source /opt/miniconda3/bin/activate; conda activate testbed` works as there.
CONDA_STANDIN = """set -e
mkdir -p /opt/miniconda3/bin /opt/miniconda3/envs
python3 -m venv --without-pip --system-site-packages /opt/miniconda3/envs/testbed
cat > /opt/miniconda3/bin/activate <<'EOF'
conda() {
  [ "$1" = activate ] && [ -d "/opt/miniconda3/envs/$2" ] || return 1
  export CONDA_DEFAULT_ENV="$2" CONDA_PREFIX="/opt/miniconda3/envs/$2" PATH="/opt/miniconda3/envs/$2/bin:$PATH"
}
EOF
"""
REPO_INIT = "cd /testbed && git init -q && git add -A && git commit -q -m base\n"


def _registry_binary() -> str | None:
    found = shutil.which("docker-registry")
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):  # what scripts/setup.sh does
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "docker-registry"],
                       capture_output=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}, timeout=300)
        found = shutil.which("docker-registry")
    return found


@contextlib.contextmanager
def local_registry(root: Path) -> Iterator[str]:
    """host:port of a fresh registry on the loopback, its storage under `root` (Docker treats 127.0.0.0/8 as
    insecure: plain HTTP). Skips the test where Debian's docker-registry cannot be installed."""
    binary = _registry_binary()
    if binary is None:
        pytest.skip("Debian's docker-registry package cannot be installed here (scripts/setup.sh installs it)")
    port = free_port()
    config = root / "config.yml"
    config.write_text(f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {root}/data\n"
                      f"  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n")
    process = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1)
                break
            except OSError:
                if process.poll() is not None:
                    raise RuntimeError(f"docker-registry exited: {process.stderr.read().decode()[-500:]}") from None
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def _tar(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(data), 0o755 if path.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def push_standin(base: str, name: str, files: dict[str, str], script: str) -> str:
    """Build an image from `base` with `files` and `script`, push it as `name`, and remove it here
    (so that grading has to pull it). Returns the commit the repository at /testbed is on."""
    from codeagent.sandbox.engine import docker_client

    client = docker_client()
    container = client.containers.create(base, ["sleep", "infinity"], network_mode="none", init=True)
    try:
        container.start()
        container.put_archive("/", _tar(files))
        code, output = container.exec_run(["bash", "-c", script + "\ncd /testbed && git rev-parse HEAD"])
        assert code == 0, output.decode()
        head = output.decode().strip().splitlines()[-1]
        repository, _, tag = name.rpartition(":")
        image = container.commit(repository=repository, tag=tag)
    finally:
        container.remove(force=True)
    for line in client.images.push(repository, tag=tag, stream=True, decode=True):
        assert "error" not in line, line
    client.images.remove(image.id, force=True)
    return head


def remove_images(registry: str) -> None:
    """The images pulled from `registry` (its port is this run's own) and the layers codeagent put
    on them (their parents are those images), children first."""
    from docker.errors import APIError

    from codeagent.harness.images.prebuilt import PREPARED_IMAGE
    from codeagent.sandbox.engine import docker_client

    client = docker_client()
    pulled = {image.id for image in client.images.list() if any(t.startswith(registry + "/") for t in image.tags)}
    layers, ours = [], set(pulled)
    for _ in range(3):  # the grading layer, then the agent's layer on it
        for image in client.images.list(name=PREPARED_IMAGE):
            if image.attrs.get("Parent") in ours and image.id not in ours:
                layers.append(image.id)
                ours.add(image.id)
    for image_id in [*reversed(layers), *pulled]:
        try:
            client.images.remove(image_id, force=True)
        except APIError:
            pass


def official_files() -> dict[str, str]:
    return {"/testbed/calc.py": CALC_BUGGY, "/testbed/conftest.py": "", "/testbed/tests/test_calc.py": ENV_TEST + TESTS}


def smith_files() -> dict[str, str]:
    hidden = TESTS + "\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    # an image where the tests once ran: their compiled copy and pytest's cache name them too
    return {"/testbed/calc.py": CALC_FIXED, "/testbed/conftest.py": "", "/testbed/tests/test_calc.py": hidden,
            "/testbed/tests/__pycache__/test_calc.cpython-311-pytest-8.3.3.pyc": hidden,
            "/testbed/.pytest_cache/v/cache/nodeids": '["tests/test_calc.py::test_add", "tests/test_calc.py::test_sub"]'}


def r2e_files() -> dict[str, str]:
    return {"/testbed/calc.py": CALC_BUGGY, "/testbed/README": "calc\n",
            "/testbed/run_tests.sh": "python -m pytest -rA r2e_tests\n",
            "/r2e_tests/test_1.py": TESTS + "\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
                                    "def test_known_broken():\n    assert sub(1, 1) == 1\n"}


# .venv is not in the repository (nor ignored by it): codeagent's layer keeps it out of every diff
R2E_SCRIPT = ("set -e\npython3 -m venv --without-pip --system-site-packages /testbed/.venv\n"
              + REPO_INIT.replace("git add -A", "git add calc.py README run_tests.sh"))


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    import json

    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path
