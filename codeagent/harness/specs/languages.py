"""Environment specs of tasks in other languages than Python (Go, Rust, JavaScript, Java, C/C++): data
in evals/environments/languages/<owner>__<name>.yaml, read here.

A file names its `repo` and `language` (a toolchain of languages/*.yaml: go, rust, node, java, c/c++)
and gives `defaults` and per-version layers (for SWE-bench Multilingual the version is the instance's
version string, often the PR number). Every layer field is optional:

    toolchain_version  the toolchain version to install (unset: the one the repository states, else Debian's)
    system_packages    Debian packages, installed on the toolchain
    pre_install        shell commands in /testbed at image build time, before `install`
    install            shell commands in /testbed at image build time, with network (unset: the
                       toolchain's own dependency fetch, the `prefetch` of its languages/*.yaml)
    env                the image's environment
    test_env           exported before the tests
    pre_test           commands before the tests
    test_cmd           the test command, or a list of them run one after the other (one log)
    log_parser         a parser of harness/logs/parsers.py's PARSERS
    test_timeout       seconds

A task is a language task when its own `environment` names a `language`, or its repository
(`swebench_repo`, else `repo` as owner/name) has a file here. Resolved field by field, later
wins: the file's defaults < the file's version < the task's own `environment`. A task's own
environment with `repo_spec: false` is complete and takes nothing from the file (a mined task: the file is
made for the official instances, whose pre_install and install run with network; a mined repository's
never do).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ...assets import asset_dir
from ...task import Task
from .files import read_yaml
from .model import SpecError, task_mapping
from .swebench import repo_name

DEFAULT_TEST_TIMEOUT = 1800  # seconds, as SWE-bench's harness allows a run
_PARSER_PREFIX = "parse_log_"
REPO = r"[\w.-]+/[\w.-]+"


class LanguageLayer(BaseModel):
    """One layer of a language spec: every field optional, an unset one leaves the layer below it."""

    model_config = ConfigDict(extra="forbid")

    toolchain_version: str | None = None
    system_packages: list[str] | None = None
    pre_install: list[str] | None = None
    install: list[str] | None = None
    env: dict[str, str] | None = None
    test_env: dict[str, str] | None = None
    pre_test: list[str] | None = None
    test_cmd: str | list[str] | None = None
    log_parser: str | None = None
    test_timeout: int | None = Field(default=None, gt=0)

    @field_validator("toolchain_version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        if isinstance(value, float):  # YAML reads 1.20 as 1.2
            raise ValueError(f"toolchain_version {value!r} must be a string (quote it: \"1.20\" is not 1.2)")  # noqa: TRY004 (pydantic wants ValueError)
        return str(value) if isinstance(value, int) else value

    @field_validator("system_packages", "pre_install", "install", "pre_test", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("log_parser")
    @classmethod
    def _parser_name(cls, value: str | None) -> str | None:
        return value.removeprefix(_PARSER_PREFIX) if value else value

    def fields_set(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.model_fields_set if getattr(self, name) is not None}


class LanguageFile(BaseModel):
    """One repository's file: `repo`, `language`, `defaults`, `versions`."""

    model_config = ConfigDict(extra="forbid")

    repo: str = Field(pattern=rf"^{REPO}$")
    language: str
    defaults: LanguageLayer = Field(default_factory=LanguageLayer)
    versions: dict[str, LanguageLayer] = Field(default_factory=dict)
    path: str = ""

    @field_validator("versions", mode="before")
    @classmethod
    def _version_keys(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        for key in value:
            if isinstance(key, float):
                raise ValueError(f"version {key!r} must be a string (quote it)")  # noqa: TRY004 (pydantic wants ValueError)
        return {str(key): layer if layer is not None else {} for key, layer in value.items()}


@dataclass(frozen=True)
class LanguageSpec:
    """A language task's resolved environment (see the module docstring)."""

    repo: str
    version: str | None
    language: str
    toolchain_version: str | None
    system_packages: list[str]
    pre_install: list[str]
    install: list[str] | None  # None: the toolchain's own dependency fetch
    env: dict[str, str]
    test_env: dict[str, str]
    pre_test: list[str]
    test_cmds: list[str]
    log_parser: str
    test_timeout: int
    layers: list[str] = field(default_factory=list)  # where the fields came from, lowest first


def language_dir() -> Path:
    return asset_dir("evals") / "environments" / "languages"


def known_languages() -> list[str]:
    from .toolchains import toolchains

    return [tool.name for tool in toolchains()]


def _check_language(language: str, where: str) -> None:
    known = known_languages()
    if language not in known:
        raise SpecError(f"{where}: unknown language {language!r} (known toolchains: {', '.join(known)})")


def load_language_specs(folder: Path | str | None = None) -> dict[str, LanguageFile]:
    """{repo: its parsed file} of every `<owner>__<name>.yaml` in `folder` (default: the project's);
    files whose name starts with `_` are not repository files."""
    root = Path(folder) if folder is not None else language_dir()
    files = sorted(root.glob("*.yaml")) if root.is_dir() else []
    stamps = tuple((path.name, path.stat().st_mtime_ns, path.stat().st_size) for path in files
                   if not path.name.startswith("_"))
    return dict(_load(str(root), stamps))


@cache
def _load(root: str, stamps: tuple[tuple[str, int, int], ...]) -> tuple[tuple[str, LanguageFile], ...]:
    specs: dict[str, LanguageFile] = {}
    for name, _, _ in stamps:
        path = Path(root) / name
        data = read_yaml(path)
        try:
            spec = LanguageFile.model_validate({**data, "path": str(path)})
        except ValidationError as err:
            raise SpecError(f"{path}: {_errors(err)}") from None
        _check_language(spec.language, str(path))
        expected = path.stem.replace("__", "/", 1)
        if spec.repo != expected:
            raise SpecError(f"{path}: says repo {spec.repo!r}, but its name says {expected!r} (<owner>__<name>.yaml)")
        specs[spec.repo] = spec
    return tuple(specs.items())


def task_environment(task: Task) -> dict[str, Any] | None:
    """The task's own `environment` as a mapping (it may come as JSON text), or None."""
    raw = task.environment
    return None if raw is None else task_mapping(raw, task.instance_id, "environment")


def is_language_task(task: Task, folder: Path | str | None = None) -> bool:
    """Does the task's own environment name a language, or its repository have a file here? Decided
    without reading the files: a malformed one fails its own tasks (language_spec_for), not all tasks."""
    try:
        own = task_environment(task)
    except SpecError:
        return False  # not ours to judge: the Python specs say what is wrong with it
    if own is not None and own.get("language"):
        return True
    repo = repo_name(task)
    root = Path(folder) if folder is not None else language_dir()
    return bool(re.fullmatch(REPO, repo)) and (root / f"{repo.replace('/', '__', 1)}.yaml").is_file()


def language_spec_for(task: Task, folder: Path | str | None = None) -> LanguageSpec | None:
    """The resolved spec of a language task; None for any other task (Python, as before)."""
    if not is_language_task(task, folder):
        return None
    repo, version = repo_name(task), task.version
    own = dict(task_environment(task) or {})
    standalone = own.pop("repo_spec", True) is False
    file = None if standalone else load_language_specs(folder).get(repo)
    layers: list[tuple[str, LanguageLayer]] = []
    language = own.get("language")
    if file is not None:
        name = Path(file.path).name
        language = language or file.language
        layers.append((f"{name}: defaults", file.defaults))
        if version is not None and version in file.versions:
            layers.append((f"{name}: versions.{version}", file.versions[version]))
        elif file.versions and not own:
            raise SpecError(f"{repo}: no environment spec for version {version!r} in {file.path} (known: "
                            f"{', '.join(file.versions)}); add it there, or give the task its own environment")
    where = f"task {task.instance_id}: environment"
    if own:
        try:
            layers.append((where, LanguageLayer.model_validate({k: v for k, v in own.items() if k != "language"})))
        except ValidationError as err:
            raise SpecError(f"{where}: {_errors(err)}") from None
    assert language  # a file has one, and a task without a file is a language task by naming one
    _check_language(str(language), where if own.get("language") or file is None else file.path)
    fields: dict[str, Any] = {}
    for _, layer in layers:
        fields.update(layer.fields_set())
    named = " or ".join(dict.fromkeys(where for where, _ in layers))
    missing = [name for name in ("test_cmd", "log_parser") if not fields.get(name)]
    if missing:
        raise SpecError(f"{repo} {version}: {named} leave {', '.join(missing)} unset")
    _check_parser(fields["log_parser"], named)
    commands = fields["test_cmd"]
    return LanguageSpec(
        repo=repo, version=version, language=str(language), toolchain_version=fields.get("toolchain_version"),
        system_packages=list(fields.get("system_packages") or []), pre_install=list(fields.get("pre_install") or []),
        install=list(fields["install"]) if "install" in fields else None, env=dict(fields.get("env") or {}),
        test_env=dict(fields.get("test_env") or {}), pre_test=list(fields.get("pre_test") or []),
        test_cmds=[commands] if isinstance(commands, str) else list(commands), log_parser=fields["log_parser"],
        test_timeout=int(fields.get("test_timeout") or DEFAULT_TEST_TIMEOUT), layers=[where for where, _ in layers])


def _errors(err: ValidationError) -> str:
    """Pydantic's errors as `field.path: message; ...` (the field named as the file spells it)."""
    return "; ".join(f"{'.'.join(map(str, error['loc'])) or '(top)'}: {error['msg']}" for error in err.errors())


def _check_parser(name: str, where: str) -> None:
    from ..logs.parsers import PARSERS

    if name not in PARSERS:
        raise SpecError(f"{where}: unknown log_parser {name!r} (known: {', '.join(sorted(PARSERS))})")
