"""Environment specs for SWE-bench repositories: data in evals/environments/swebench/, read here.

One YAML file per repository gives a repo-level `defaults` and per-version overrides; `_common.yaml`
gives the defaults of every repository and the table of Pythons our images can provide. A spec is
resolved for one task, field by field, in this order (later wins):

    _common defaults < repo defaults < version < on_python[used] (repo, then version) < the task's own

The task's own config comes from `task.install_config` or `task.environment` (a
mapping or its JSON text). It may use our field names or SWE-bench / SWE-rebench names (`packages`,
`reqs_path`, `eval_commands`, `env_vars`, `nano_cpus`, `apt-pkgs`, a `parse_log_*` parser...). A
task with a complete config needs no repo file at all.

Python: the requested version is used when the table has it. Otherwise the nearest one is used,
ties going to the lower one, never one below `python_min`: 3.6/3.7/3.8 -> 3.9, 3.10 -> 3.9,
3.12 -> 3.11. Why lower on a tie: a spec's pins were chosen for the requested Python, and a pinned
package released before a newer Python has no wheel for it (numpy 1.23.0 has cp39/cp310 wheels,
none for 3.11), so going up turns pins into source builds, the most common way an old environment
fails to build; going one minor down only breaks code that needs the newer Python, which is what
`python_min` is for. Both the request and the choice are recorded (`python_requested`,
`python_used`, `fallback`), and `on_python` lets the data adapt pins for the Python used. Table
entries marked `download` (a Python no suite has, fetched with `uv python install`) count only
when downloads are allowed (`downloads_allowed()`); air-gapped, the fallback above applies.

The other modules: model (the models and image keys), files (reading the data),
overrides (a task's own install config), requirements (requirement files).

How an image builder uses a resolved spec (the order matters):

    system layers:  apt-get install system_packages (+ the Python's debian_packages when
                    bootstrapped), the common ones first, a repository's own above (layers/python_env.py)
    env image:      if `requirements`, the first of those files that exists in
                    the repository at `requirements_commit`, cleaned (`clean_requirements`), with
                    `pip install -r`; then `pip install` pip_packages in one command (pins win);
                    image ENV = env
    deps image:     with `deps_layer`, on the env image: the repository at environment_setup_commit
                    through pre_install and install, the project then uninstalled and the tree
                    removed (one per version)
    instance image: the repository at base_commit in /testbed; pre_install, then install, in /testbed,
                    on the env image; with a deps image, the result is written over it (only what differs)
    tests:          directives.test_command(task, spec), in /testbed, within test_timeout seconds

`env_key()` hashes what defines the env image, `instance_key()` that plus the repository, base commit
and install steps; both are sha256 of sorted JSON, stable across runs and machines.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ...task import Task
from .files import RepoSpecs, SpecLibrary, load_library, spec_dir
from .model import (
    COMMON_FILE,
    SCHEMA,
    EnvSpec,
    PythonImage,
    ResolvedSpec,
    SpecError,
    _version,
)
from .overrides import task_override
from .requirements import (
    REPLACED_REQUIREMENTS,
    clean_requirements,
    requirements_text,
)

__all__ = [
    "COMMON_FILE",
    "REPLACED_REQUIREMENTS",
    "SCHEMA",
    "EnvSpec",
    "PythonImage",
    "RepoSpecs",
    "ResolvedSpec",
    "SpecError",
    "SpecLibrary",
    "choose_python",
    "clean_requirements",
    "downloads_allowed",
    "load_library",
    "repo_name",
    "requirements_text",
    "spec_dir",
    "spec_for",
    "task_override",
]


def downloads_allowed() -> bool:
    """Whether Pythons that are not a suite's own may be fetched (`uv python install`): only when
    CODEAGENT_PYTHON_DOWNLOADS=1 says the network reaches python-build-standalone (or its mirror,
    UV_PYTHON_INSTALL_MIRROR). Off by default: air-gapped builds fall back, and say so."""
    return os.environ.get("CODEAGENT_PYTHON_DOWNLOADS", "").strip().lower() in ("1", "true", "yes")


def choose_python(requested: str, pythons: list[PythonImage], minimum: str | None = None,
                  downloads: bool = False) -> PythonImage:
    """The exact Python when available, else the nearest (ties to the lower), never below `minimum`.
    Pythons marked `download` are candidates only with `downloads`."""
    want = _version(requested)
    floor = _version(minimum) if minimum else (0, 0)
    candidates = [image for image in pythons if image.version >= floor and (downloads or not image.download)]
    if not candidates:
        have = ", ".join(image.python for image in pythons if downloads or not image.download)
        raise SpecError(f"Python {requested} (at least {minimum}) is wanted, but the images provide only {have}; "
                        "add one to `pythons` in _common.yaml")

    def distance(image: PythonImage) -> tuple[int, tuple[int, int]]:
        major, minor = image.version
        return abs((major * 100 + minor) - (want[0] * 100 + want[1])), image.version

    return min(candidates, key=distance)


def repo_name(task: Task) -> str:
    """`owner/name` of a task's repository: its swebench_repo, else parsed from a GitHub URL."""
    if task.swebench_repo:
        return task.swebench_repo
    match = re.search(r"github\.com[/:]([^/]+/[^/]+?)(?:\.git)?/?$", task.repo)
    if match:
        return match.group(1)
    return task.repo.rstrip("/").removesuffix(".git")


def _merge(layers: list[EnvSpec]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(layer.fields_set())
    return merged


def spec_for(task: Task, pythons: list[PythonImage] | None = None,
             folder: Path | str | None = None, downloads: bool | None = None) -> ResolvedSpec:
    """The resolved environment spec of a task (see the module docstring for the layering).
    `downloads`: may Pythons be fetched (default: downloads_allowed())."""
    library = load_library(folder)
    pythons = pythons if pythons is not None else library.pythons
    repo = repo_name(task)
    version = task.version
    override, notes = task_override(task)

    layers: list[tuple[str, EnvSpec]] = [("_common.yaml: defaults", library.common)]
    on_python: list[tuple[str, dict[str, EnvSpec]]] = []
    specs = library.repos.get(repo)
    if specs is not None:
        file = Path(specs.path).name
        layers.append((f"{file}: defaults", specs.defaults))
        on_python.append((f"{file}: defaults", specs.defaults_on_python))
        if version in specs.versions:
            layers.append((f"{file}: versions.{version}", specs.versions[version]))
            on_python.append((f"{file}: versions.{version}", specs.versions_on_python[version]))
        elif override is None:
            known = ", ".join(specs.versions) or "none"
            raise SpecError(f"{repo}: no environment spec for version {version!r} (known: {known}); add it to "
                            f"{specs.path}, or give the task an install_config")
    elif override is None:
        raise SpecError(f"no environment spec for repository {repo!r} (known: {', '.join(sorted(library.repos))}); "
                        f"add a file to {library.folder}, or give the task an install_config")

    top = [override] if override is not None else []
    before = _merge([layer for _, layer in layers] + top)
    requested = before.get("python")
    if not requested:
        raise SpecError(f"{repo} {version}: the spec names no Python (set `python`)")
    image = choose_python(requested, pythons, before.get("python_min"),
                          downloads_allowed() if downloads is None else downloads)

    for where, subs in on_python:
        if image.python in subs:
            layers.append((f"{where}: on_python.{image.python}", subs[image.python]))
    if override is not None:
        layers.append(("task: install_config", override))
    fields = _merge([layer for _, layer in layers])

    missing = [name for name in ("test_cmd", "log_parser", "directives", "test_timeout") if fields.get(name) is None]
    if missing:
        raise SpecError(f"{repo} {version}: the spec leaves {', '.join(missing)} unset")
    system = list(dict.fromkeys([*(fields.get("system_packages") or []), *(fields.get("extra_system_packages") or [])]))
    requirements = fields.get("requirements") or []
    return ResolvedSpec(
        repo=repo,
        version=version,
        instance_id=task.instance_id,
        base_commit=task.base_commit,
        environment_setup_commit=task.environment_setup_commit,
        python_requested=requested,
        python_used=image.python,
        fallback=image.python != requested,
        suite=image.suite,
        pull=image.pull,
        python_download=image.download,
        python_debian_packages=image.debian_packages,
        system_packages=system,
        requirements=requirements,
        requirements_commit=(task.environment_setup_commit or task.base_commit) if requirements else None,
        pip_packages=fields.get("pip_packages") or [],
        pre_install=fields.get("pre_install") or [],
        install=fields.get("install") or [],
        # Only with a setup commit: it is what the version's instances share (their own commits differ).
        deps_commit=task.environment_setup_commit if fields.get("deps_layer") and fields.get("install") else None,
        env=fields.get("env") or {},
        test_env=fields.get("test_env") or {},
        pre_test=fields.get("pre_test") or [],
        test_cmd=fields["test_cmd"],
        log_parser=fields["log_parser"],
        directives=fields["directives"],
        test_timeout=fields["test_timeout"],
        services=fields.get("services") or [],
        cpus=fields.get("cpus"),
        layers=[where for where, _ in layers],
        notes=notes,
    )
