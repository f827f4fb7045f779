"""The workspace image of a repository snapshot: the base image + the tree + a one-commit git repository,
tagged by the tree's hash and built once. Every Docker sandbox on that tree is a container of it: overlayfs
shares the files, so N sandboxes cost N thin writable layers, not N copies."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

from .capabilities import CAPABILITIES
from .engine import docker_client
from .errors import SandboxError, WorkspaceError
from .images import require_image
from .labels import LABEL, owner_labels, run_label
from .workspace import INIT_REPO_SCRIPT, WORKSPACE_RECIPE, RepoSnapshot

WORKSPACE_IMAGE = "codeagent/workspace"
_workspace_lock = threading.Lock()
_known_workspaces: dict[tuple[str, str, str], str] = {}


def workspace_image(snapshot: RepoSnapshot, base_tag: str, workdir: str) -> str:
    """The image holding `snapshot` at `workdir` on top of `base_tag`; built once, then cached."""
    from docker.errors import ImageNotFound

    key = (snapshot.tree, base_tag, workdir)
    if key in _known_workspaces:  # saves two engine round trips per sandbox start
        return _known_workspaces[key]
    client = docker_client()
    base_id = client.images.get(require_image(base_tag)).id.split(":")[-1][:12]
    tag = f"{WORKSPACE_IMAGE}:{snapshot.tree[:16]}-{base_id}-{WORKSPACE_RECIPE}"
    with _workspace_lock:
        try:
            client.images.get(tag)
            _known_workspaces[key] = tag
            return tag
        except ImageNotFound:
            pass
        with tempfile.TemporaryDirectory(prefix="codeagent-tree-") as tmp:
            tarball = Path(tmp) / "tree.tar"
            snapshot.write_tar(tarball, prefix=workdir)  # extracted at /: see write_tar
            container = client.containers.create(base_tag, ["sleep", "infinity"], network_mode="none",
                                                 labels={LABEL: "build", **owner_labels()}, init=True, **_confined())
            try:
                container.start()
                _exec_checked(container, ["mkdir", "-p", workdir])
                with open(tarball, "rb") as data:
                    if not container.put_archive("/", data):
                        raise WorkspaceError(f"copying {snapshot.source} into the image failed")
                _exec_checked(container, ["sh", "-c", INIT_REPO_SCRIPT, "sh", snapshot.commit], workdir=workdir)
                repository, _, version = tag.rpartition(":")
                container.commit(repository=repository, tag=version,
                                 changes=[f"WORKDIR {workdir}"],
                                 conf={"Labels": {"codeagent.commit": snapshot.commit,
                                                  "codeagent.source": snapshot.source[:200],
                                                  **run_label()}})
            except Exception as exc:
                if "no space left on device" in str(exc).lower():
                    raise WorkspaceError("disk full while building the workspace image: "
                                         "free space, or `codeagent sandbox prune --images`") from exc
                raise
            finally:
                container.remove(force=True)
    _known_workspaces[key] = tag
    return tag


def _confined() -> dict:
    """The sandbox's capabilities, no new privileges, and limits: only git runs here, on the repository's files."""
    return dict(cap_drop=["ALL"], cap_add=CAPABILITIES, security_opt=["no-new-privileges"], mem_limit="2g",
                memswap_limit="2g", pids_limit=512)


def forget_workspaces() -> None:
    """Look the images up again (one was pruned since)."""
    _known_workspaces.clear()


def _exec_checked(container, cmd: list[str], workdir: str | None = None) -> str:
    code, output = container.exec_run(cmd, workdir=workdir)
    text = output.decode(errors="replace")
    if code != 0:
        raise SandboxError(f"`{' '.join(cmd)[:200]}` failed in the container ({code}): {text[-1000:]}")
    return text
