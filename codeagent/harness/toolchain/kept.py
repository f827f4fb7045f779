"""What is kept of a layer that failed, and under which code. A layer that failed is noted (`.failed`: said again,
tried again after a while); a build that failed is kept as it is (the graded run shows what does not compile) and
its failure noted (`.warning`: said at every start). Either, noted under other code than the one running
(recipe_version), is made again at once: a fix there does not always change the layer's tag (issue 36: jsoup's
and gson's failed builds were found again by their tags after the rules that would have fixed them landed).
Used by both paths that build layers: a user's repository (resolve.py) and a language task (images.py)."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from ...sandbox.workspace import cache_dir


@functools.cache
def recipe_version() -> str:
    """The code and data that make an environment's layers (this package, layers/, the workspace script,
    languages/*.yaml)."""
    from ...assets import asset_dir
    from ...sandbox import workspace

    here = Path(__file__).resolve().parent
    files = sorted([*here.glob("*.py"), *here.parent.joinpath("layers").glob("*.py"), Path(workspace.__file__),
                    *asset_dir("languages").rglob("*.yaml")])
    digest_ = hashlib.sha256()
    for path in files:
        digest_.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest_.hexdigest()[:16]


def log_path(tag: str) -> Path:
    """Where a layer's full build log is kept (and, beside it, what its build said failed: `.warning`)."""
    return cache_dir() / "logs" / "environments" / f"{tag.replace('/', '_').replace(':', '_')}.log"


def build_warning(tag: str) -> Path:
    """Where what a build layer's build said it failed is kept (said at every start)."""
    return log_path(tag).with_suffix(".warning")


def made_by(path: Path) -> Path:
    """Beside a `.failed` or `.warning` file: the recipe_version that wrote it."""
    return path.with_name(path.name + ".recipe")


def stale(path: Path) -> bool:
    """A failure noted under another recipe_version (or before they were noted): not to be trusted now."""
    version = made_by(path)
    return not version.is_file() or version.read_text().strip() != recipe_version()


def note(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    made_by(path).write_text(recipe_version())


def forget(path: Path) -> None:
    path.unlink(missing_ok=True)
    made_by(path).unlink(missing_ok=True)


def untag(tag: str) -> None:
    """Every tag of the image `tag` names (a build with missing rounds is also tagged under its own digest),
    so that it is built again; its layers stay while another image uses them."""
    from ...sandbox.docker import docker_client

    client = docker_client()
    for each in client.images.get(tag).tags:
        client.images.remove(each, noprune=False)


def renew_failed_build(tag: str) -> str:
    """A build kept although it failed, noted under other code than the one running: forgotten and untagged, so
    that it is built again. Returns '' or, where Docker refused to untag it (kept as it is), what to say."""
    from docker.errors import APIError

    from ...sandbox.images import image_exists

    kept = build_warning(tag)
    if not (kept.exists() and stale(kept)):
        return ""
    forget(kept)
    if not image_exists(tag):
        return ""
    try:
        untag(tag)
    except APIError as error:
        return f"the failed build {tag} could not be removed to build it again: {error}"
    return ""
