"""The bundled example tasks (evals/examples/NAME): a repository as plain files plus task.yaml.

A git repository is made from the files on first use, in the cache, with a fixed author and
date so its commit is the same on every machine.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import yaml

from .assets import asset_path
from .sandbox.workspace import cache_dir

FIXED_IDENTITY = {
    "GIT_AUTHOR_NAME": "codeagent", "GIT_AUTHOR_EMAIL": "examples@codeagent",
    "GIT_COMMITTER_NAME": "codeagent", "GIT_COMMITTER_EMAIL": "examples@codeagent",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}


def example_names() -> list[str]:
    return sorted(p.parent.name for p in asset_path("evals", "examples").glob("*/task.yaml"))


def example_task(name: str) -> dict:
    path = asset_path("evals", "examples", name, "task.yaml")
    if not path.is_file():
        raise FileNotFoundError(f"no bundled example named {name!r}; choose one of {', '.join(example_names())}")
    return yaml.safe_load(path.read_text())


def example_repo(name: str) -> Path:
    """A git checkout of the example's repository (made once per content)."""
    source = asset_path("evals", "examples", name, "repo")
    if not source.is_dir():
        raise FileNotFoundError(f"no bundled example named {name!r}; choose one of {', '.join(example_names())}")
    files = sorted(p for p in source.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file.relative_to(source)).encode() + b"\0" + file.read_bytes() + b"\0")
    target = cache_dir() / "examples" / f"{name}-{digest.hexdigest()[:12]}"
    if (target / ".git").is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    try:
        for file in files:
            destination = staging / file.relative_to(source)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(file, destination)
        env = {**os.environ, **FIXED_IDENTITY}
        for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"],
                    ["git", "commit", "-q", "--no-verify", "-m", f"{name}: example repository"]):
            subprocess.run(cmd, cwd=staging, env=env, check=True, capture_output=True)
        os.replace(staging, target)
    except OSError:
        if not (target / ".git").is_dir():  # another process made it first: theirs is as good
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
