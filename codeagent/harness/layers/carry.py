"""A layer built on one image and committed over another (layer.py's `Layer.build_on`, `carried`).

The build runs on `build_on`; then the `carried` folders are written over a container of the layer's
parent, only what differs (tree_sync.py), and that container is committed: the image holds exactly what
the build made in those folders, its layer only their difference from the parent. A build confined to
`carried` folders may change nothing else: what it changes elsewhere is refused (folders whose only
change is their own metadata aside), and its scratch (/tmp, /var/tmp) is never kept.

What tree_sync compares is content, kind, permission bits and link targets: a file kept from the parent
keeps the parent's times, so its ctime tells a process in the image which files the build did not
rewrite. Carry only what that may show (the instance's dependencies against the version's, never a
repository tree of another commit)."""

from __future__ import annotations

import hashlib
import tarfile
import tempfile
from pathlib import Path

SCRATCH = ("/tmp/", "/var/tmp/")
TREE_SYNC = Path(__file__).with_name("tree_sync.py")
STAGING = "tmp/codeagent-carry"


def carry_recipe(carried: list[str]) -> str:
    """What a carried layer's tag must also depend on: a changed sync never reuses a stale image."""
    return f"\n# carried: {' '.join(carried)}; tree_sync {hashlib.sha256(TREE_SYNC.read_bytes()).hexdigest()[:16]}"


def changes_outside(container, carried: list[str]) -> list[str]:
    """The paths the container changed (against its image) outside `carried` and the scratch folders;
    a folder only modified (its entries changed, its own metadata) is not a change."""
    found = []
    for change in container.diff() or []:
        path = change["Path"]
        if any(path == folder or path.startswith(folder.rstrip("/") + "/") for folder in carried):
            continue
        if path.startswith(SCRATCH) or path.rstrip("/") in ("/tmp", "/var/tmp"):
            continue
        if change["Kind"] == 0 and container.exec_run(["test", "-d", path, "-a", "!", "-L", path])[0] == 0:
            continue
        found.append(path)
    return sorted(found)


def carry_over(builder, target, carried: list[str], run) -> None:
    """Write each of `builder`'s `carried` folders over the same folder of `target` (a started
    container); `run(container, argv) -> (exit code, output)` runs a command to its end."""
    sync = TREE_SYNC.read_text()
    for number, path in enumerate(carried):
        staging = f"{STAGING}/{number}"
        with tempfile.TemporaryDirectory(prefix="codeagent-carry-") as tmp:
            tarball = Path(tmp) / "carried.tar"
            _retarred(builder.get_archive(path)[0], staging, Path(tmp), tarball)
            code, output = run(target, ["mkdir", "-p", f"/{staging}", path])
            with open(tarball, "rb") as data:
                if code != 0 or not target.put_archive("/", data):
                    raise RuntimeError(f"copying {path} into the container failed: {output.decode(errors='replace')}")
        # the system's Python, isolated and without site: the venv being written is not the one running
        code, output = run(target, ["/usr/bin/python3", "-I", "-S", "-c", sync, f"/{staging}/{Path(path).name}", path])
        if code != 0:
            raise RuntimeError(f"writing {path} over the parent failed: {output.decode(errors='replace')[-800:]}")
    run(target, ["rm", "-rf", f"/{STAGING}"])


def _retarred(chunks, prefix: str, tmp: Path, destination: Path) -> None:
    """The archive `chunks` (docker's get_archive) with every name under `prefix`, to be extracted at /:
    the engine refuses a link that climbs above the folder it extracts into, and at / none can."""
    raw = tmp / "raw.tar"
    with open(raw, "wb") as out:
        for chunk in chunks:
            out.write(chunk)
    with tarfile.open(raw, "r:") as source, tarfile.open(destination, "w:", format=tarfile.PAX_FORMAT) as result:
        for member in source:
            member.name = f"{prefix}/{member.name}"
            if member.islnk():  # a hard link names another member of the archive
                member.linkname = f"{prefix}/{member.linkname}"
            result.addfile(member, source.extractfile(member) if member.isreg() else None)
    raw.unlink()
