"""The test fixtures themselves: what a test run removes is what it created."""

from __future__ import annotations

from codeagent.sandbox import snapshot
from codeagent.sandbox.docker import RUN_LABEL, RUN_LABEL_ENV, workspace_image
from codeagent.sandbox.engine import docker_client
from tests.support.docker import images_of_this_run


def test_teardown_removes_only_the_workspace_images_of_this_test_run(make_repo, base_image, monkeypatch):
    client = docker_client()
    ours = workspace_image(snapshot(make_repo({"ours.py": "1\n"})), base_image, "/work")
    with monkeypatch.context() as outside:  # a codeagent run beside the tests: no test-run label
        outside.delenv(RUN_LABEL_ENV)
        theirs = workspace_image(snapshot(make_repo({"theirs.py": "2\n"})), base_image, "/work")
    try:
        assert client.images.get(ours).labels.get(RUN_LABEL, "").startswith("pytest-")
        assert RUN_LABEL not in client.images.get(theirs).labels
        doomed = {image.id for image in images_of_this_run(client)}
        assert client.images.get(ours).id in doomed
        assert client.images.get(theirs).id not in doomed
    finally:
        for tag in (ours, theirs):
            client.images.remove(tag, force=True)
