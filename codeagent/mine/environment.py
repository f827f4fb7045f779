"""A candidate as a Task in the harness's terms, so that it is graded exactly as an eval task is:

- a Python repository with a SWE-bench spec file (evals/environments/swebench/): `version` is the
  repository's major.minor at the base commit (its `__version__` as SWE-bench reads it, else its
  packaging metadata), mapped to the nearest spec version not above it;
- another language: `environment` names the language, the test command and the parser of
  the repository's own graded test report (harness/toolchain/resolve.py's `test_report`), and the toolchain
  version of the unit's day (toolchain_era.py);
- Python without a spec file: a generic environment (pytest over the test patch's files).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..harness import load_library
from ..sandbox.workspace import RepoSnapshot
from ..task import Task
from .candidates import Candidate, Skip
from .gitread import END, git, object_id
from .toolchain_era import toolchain_version

# Where a Python repository states its version, in the order SWE-bench's version files are tried;
# {name} is the repository's name.
VERSION_FILES = ("{name}/__version__.py", "src/{name}/__version__.py", "{name}/__about__.py", "src/{name}/__about__.py",
                 "{name}/version.py", "src/{name}/version.py", "{name}/__init__.py", "src/{name}/__init__.py",
                 "{name}/__pkginfo__.py")
METADATA_FILES = ("pyproject.toml", "setup.cfg", "setup.py")
_DUNDER = re.compile(r"""^__version__\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""", re.M)
_METADATA = re.compile(r"""^\s*version\s*[=:]\s*['"]?(\d+\.\d+[^'"\s,]*)""", re.M)
PYTHON_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", "tox.ini", "pytest.ini")
GENERIC_PYTHON = {"python": "3.11", "system_packages": [], "pip_packages": ["pytest"],
                  "test_cmd": "python -m pytest -rA", "log_parser": "pytest", "directives": "paths", "test_timeout": 900}
INSTALL = ["python -m pip install -e ."]


@dataclass(frozen=True)
class Repository:
    git_dir: Path
    name: str  # owner/name
    source: str  # what the user gave (a path, a mirror, a URL)


def _show(repo: Repository, commit: str, path: str) -> str | None:
    try:  # cat-file, not show: no textconv filter of the repository's attributes runs
        return git(repo.git_dir, "cat-file", "blob", END, f"{object_id(commit)}:{path}")
    except RuntimeError:
        return None


def _files(repo: Repository, commit: str) -> list[str]:
    return [name for name in git(repo.git_dir, "ls-tree", "-r", "-z", "--name-only", END, object_id(commit)).split("\0")
            if name]


def stated_version(repo: Repository, commit: str) -> str | None:
    """major.minor of the repository at `commit`, or None when it states none."""
    name = repo.name.split("/")[-1].lower().replace("-", "_")
    for pattern in VERSION_FILES:
        text = _show(repo, commit, pattern.format(name=name))
        if text and (match := _DUNDER.search(text)):
            return _major_minor(match.group(1))
    for path in METADATA_FILES:
        text = _show(repo, commit, path)
        if text and (match := _METADATA.search(text)):
            return _major_minor(match.group(1))
    return None


def setup_commit(repo: Repository, base: str, stated: str, ref: str = "HEAD") -> str:
    """The task's environment_setup_commit, as SWE-bench chooses it: the newest commit of `ref`'s
    first-parent history that still states `base`'s version (`stated`, major.minor). Every task of a
    version then reads its requirements there, so they share one environment (its layers built once),
    and a requirement file that a later commit of the version fixed does not break the older ones.
    Versions only rise along the history, so the last commit stating it is found by bisection."""
    tip = object_id(git(repo.git_dir, "rev-parse", "--verify", END, f"{ref}^{{commit}}").strip())
    return _last_stating(repo, tip, stated, object_id(base))


@lru_cache(maxsize=256)
def _last_stating(repo: Repository, tip: str, stated: str, base: str) -> str:
    later = [object_id(sha) for sha in git(repo.git_dir, "rev-list", "--first-parent", "--reverse", END,
                                            f"{object_id(base)}..{object_id(tip)}").split()]
    low, high = 0, len(later)  # later[:low] state it; later[high:] do not
    while low < high:
        middle = (low + high) // 2
        if stated_version(repo, later[middle]) == stated:
            low = middle + 1
        else:
            high = middle
    return later[low - 1] if low else base


def _major_minor(version: str) -> str | None:
    match = re.match(r"v?(\d+)\.(\d+)", version.strip())
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def nearest_version(version: str, known: list[str]) -> str | None:
    """The highest of `known` that is not above `version` (None: all are above it)."""
    below = [key for key in known if _key(key) <= _key(version)]
    return max(below, key=_key) if below else None


def _test_report(snap: RepoSnapshot):
    """The repository's graded test report (None: no toolchain detected)."""
    from ..harness import test_report

    return test_report(snap)


# Compiled once into the instance image, so that each run compiles only what a patch changes (Go: every test
# binary built, none run: `-exec /bin/true`; a build failure is the runs' to report). Only where compiling
# runs none of the repository's code (Rust's build scripts would, with the network of an image build).
WARM_UP = {"go": ["go test -count=1 -exec /bin/true ./... >/dev/null 2>&1 || true"]}


def language_environment(report) -> dict[str, Any]:
    """A task's environment from a repository's TestReport (language, command, parser)."""
    environment: dict[str, Any] = {"language": report.language, "test_cmd": report.command,
                                   "log_parser": report.log_parser,
                                   "repo_spec": False}  # an official spec's network steps are not for a mined task
    if report.language in WARM_UP:
        environment["pre_install"] = list(WARM_UP[report.language])
    return environment


def python_environment(files: list[str]) -> dict[str, Any]:
    """The generic environment of a Python repository without a spec: installed when it is a package."""
    packaged = any(name in files for name in ("pyproject.toml", "setup.py", "setup.cfg"))
    return {**GENERIC_PYTHON, "install": INSTALL if packaged else []}


def task_for(repo: Repository, found: Candidate, ref: str = "HEAD") -> Task:
    """The candidate as a Task (no test lists yet: validation finds them), or Skip when no environment
    fits. `ref`: the history walked (a spec repository's environment_setup_commit is on it)."""
    commit = found.commit
    fields: dict[str, Any] = {"swebench_repo": repo.name, "created_at": commit.date}
    version = setup = None
    specs = load_library().repos.get(repo.name)
    if specs is not None:
        stated = stated_version(repo, commit.parent)
        if stated is None:
            raise Skip("environment: the repository states no version at the base commit")
        version = nearest_version(stated, list(specs.versions))
        if version is None:
            raise Skip(f"environment: no spec version at or below {stated} in {Path(specs.path).name}")
        # the newest commit stating the version on the unit's own line: a maintenance line (2.0.x) has its own
        setup = setup_commit(repo, commit.parent, stated, f"{object_id(commit.line)}^2" if commit.line else ref)
    else:
        from ..sandbox.workspace import snapshot

        report = _test_report(snapshot(str(repo.git_dir), commit.parent))
        if report is not None and report.language != "python":
            fields["environment"] = language_environment(report)
            version = toolchain_version(report.language, lambda path: _show(repo, commit.parent, path), commit.date)
            if version:  # the version of the unit's day (toolchain_era.py), which the harness installs
                fields["environment"]["toolchain_version"] = version
        else:
            try:
                files = _files(repo, commit.parent)
            except RuntimeError as error:
                raise Skip(f"unreadable commit: {str(error).splitlines()[-1][-200:]}") from None
            if not any(name.endswith(".py") for name in files):
                raise Skip("environment: no toolchain detected (and no Python files)")
            fields["environment"] = python_environment(files)
    owner, name = repo.name.split("/", 1)
    return Task(repo=str(repo.git_dir), instance_id=f"{owner}__{name}-{commit.sha[:12]}",
                problem_statement=commit.message, base_commit=commit.parent, gold_patch=found.gold_patch,
                test_patch=found.test_patch, version=version, environment_setup_commit=setup, extra=fields)
