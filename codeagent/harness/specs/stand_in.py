"""A tiny repository standing in for a real one, so that a spec's build steps can run without the
real sources (django, matplotlib and scikit-learn are too large to fetch here).

The stand-in has what the spec's install steps touch: the package directory, a setup.py with the
extras that install commands name (`.[dev]`, `.[test]`), and every requirement file the spec
lists. Each requirement file holds one small requirement, not the real project's list: a build of
a stand-in proves the spec's Python, system packages, pins and install commands work together, not
that the real requirement files resolve.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from ...task import Task
from .swebench import ResolvedSpec, spec_for

# The import package each repository installs (the stand-in makes a directory of that name).
PACKAGES = {"django/django": "django", "matplotlib/matplotlib": "matplotlib",
            "scikit-learn/scikit-learn": "sklearn"}
STAND_IN_REQUIREMENT = "six\n"
GIT_ENV = {"GIT_AUTHOR_NAME": "stand-in", "GIT_AUTHOR_EMAIL": "stand-in@localhost",
           "GIT_COMMITTER_NAME": "stand-in", "GIT_COMMITTER_EMAIL": "stand-in@localhost",
           "PATH": "/usr/bin:/bin:/usr/local/bin"}


def stand_in_task(repo: str, version: str, root: Path) -> tuple[Task, ResolvedSpec]:
    """A stand-in repository for `repo` at `version` under `root`, its Task and its resolved spec."""
    probe = Task(repo=f"https://github.com/{repo}", problem_statement="-", instance_id=_instance_id(repo, version),
                 base_commit="0" * 40, version=version, extra={"swebench_repo": repo})
    files = stand_in_files(repo, spec_for(probe))
    folder = root / _instance_id(repo, version)
    for path, text in files.items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "stand-in"]):
        subprocess.run(cmd, cwd=folder, check=True, env=GIT_ENV, capture_output=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, check=True, capture_output=True,
                            text=True).stdout.strip()
    task = probe.model_copy(update={"repo": str(folder), "base_commit": commit,
                                    "environment_setup_commit": commit})
    return task, spec_for(task)


def stand_in_files(repo: str, spec: ResolvedSpec) -> dict[str, str]:
    package = PACKAGES.get(repo) or repo.rpartition("/")[2].replace("-", "_")
    files = {f"{package}/__init__.py": "__version__ = '0.0'\n",
             "setup.py": ("from setuptools import setup\n\n"
                          f"setup(name={package!r}, version='0.0', packages=[{package!r}],\n"
                          "      extras_require={'dev': [], 'test': []})\n")}
    for path in spec.requirements:
        files[path] = STAND_IN_REQUIREMENT
    return files


def _instance_id(repo: str, version: str) -> str:
    return f"{repo.replace('/', '__')}-stand-in-{version}"
