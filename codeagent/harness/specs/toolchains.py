"""The `toolchain:` section of a language's file in languages/ (its README says what each field means): what a
sandbox needs to build and test a repository of that language. Code navigation (code/languages.py) reads the
rest of the file and keeps this section as written; the harness reads it here."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from ...code.languages import LANGUAGES


@dataclass(frozen=True)
class ReportRecipe:
    """How a repository's test suite prints a report a log parser reads (`test_report:`)."""

    command: str
    log_parser: str  # a name of harness/logs/parsers.py's PARSERS


@dataclass(frozen=True)
class VersionRule:
    """Where a repository states a version: `file` + `pattern` (group 1 is it), or `file` + `json` (a
    dotted path into the JSON file); `value`: what a match means instead (a lockfile's format -> a major)."""

    file: str
    pattern: str = ""
    json: str = ""
    value: str = ""


@dataclass(frozen=True)
class Variant:
    """A flavour of a toolchain chosen by a file the repository holds (a lockfile: npm, yarn, pnpm), and
    by its text when `when_pattern` is set (yarn.lock's `__metadata:`: Yarn Berry)."""

    when: str
    name: str
    when_pattern: str = ""
    install: str = ""  # toolchain steps ($PM_VERSION: the version `versions` found, else `default_version`)
    versions: tuple[VersionRule, ...] = ()
    default_version: str = ""
    fetch: str = ""
    fetch_trusted: str = ""
    build: str = ""
    exec: str = ""  # how its runners' binaries are run (`pnpm exec`): a runner's `{exec}`
    run: str = ""  # how its scripts are run (`pnpm run`): a runner's `{run}`
    test_command: str = ""
    test_report: ReportRecipe | None = None


@dataclass(frozen=True)
class Runner:
    """A test runner chosen by the repository's `runners_from` manifest (package.json: jest, vitest...)."""

    name: str
    test_report: ReportRecipe
    config_files: tuple[str, ...] = ()  # its configuration at the top (vitest.config.ts) says it too
    default_spec: tuple[str, ...] = ()  # where it looks for tests when given none (mocha: test/*.js), when narrow


@dataclass(frozen=True)
class Missing:
    """A build's output naming what the fetch missed (`pattern`, named groups), and the declarative step
    that fetches one (`fetch`, formatted with the groups) before the build runs again."""

    pattern: str
    fetch: str


@dataclass(frozen=True)
class Toolchain:
    """What a sandbox needs to build and test a repository of this language (the `toolchain:`
    section; harness/toolchain/resolve.py detects it and builds its layers)."""

    name: str
    order: int  # detection order among toolchains with the same evidence
    detect: tuple[str, ...]  # any of these files at the repository's top
    requires_any: tuple[str, ...] = ()  # and, when given, a file matching one of these (a name anywhere, or a path)
    evidence: tuple[str, ...] = ()  # the file extensions that count for it (detection by evidence)
    test_markers: tuple[VersionRule, ...] = ()  # where a file's text says it has tests (CMake's add_test)
    packages: tuple[str, ...] = ()  # Debian packages
    install: str = ""  # shell steps after the packages (root, with network; no repository code)
    env: tuple[tuple[str, str], ...] = ()
    version_command: str = ""
    versions: tuple[VersionRule, ...] = ()
    version_install: str = ""  # shell steps that install the stated version ($VERSION)
    default_version: str = ""  # $VERSION when none is stated (a recipe that always installs its own)
    packaged_version: str = ""  # what `packages` install: a stated version not above it needs no version_install
    variants: tuple[Variant, ...] = ()
    dependency_files: tuple[str, ...] = ()  # what keys the dependencies (a name anywhere, or a path pattern)
    hide: tuple[str, ...] = ()  # the repository's files set aside while fetching (its tools' configuration)
    fetch: str = ""  # with network, in the repository: declarative downloads only (no repository code)
    fetch_trusted: str = ""  # what a trusted repository's fetch runs instead (its install scripts on)
    build: str = ""  # without network, after the fetch: install from the caches, compile once
    missing: tuple[Missing, ...] = ()  # what a build's output says the fetch missed, each with its fetch
    test_command: str = ""
    test_report: ReportRecipe | None = None
    runners: tuple[Runner, ...] = ()
    runners_from: str = ""  # the JSON manifest whose test script, then dependencies, name the runner


def _report(data: dict | None) -> ReportRecipe | None:
    return ReportRecipe(str(data["command"]), str(data["log_parser"])) if data else None


def _rules(data: list | None) -> tuple[VersionRule, ...]:
    return tuple(VersionRule(**{key: str(value) for key, value in rule.items()}) for rule in data or ())


def _variant(data: dict) -> Variant:
    plain = {key: str(value) for key, value in data.items() if key not in ("test_report", "versions")}
    return Variant(**plain, versions=_rules(data.get("versions")), test_report=_report(data.get("test_report")))


def _runner(data: dict) -> Runner:
    recipe = _report(data["test_report"])
    if recipe is None:
        raise KeyError(f"runner {data.get('name')!r}: test_report")
    return Runner(str(data["name"]), recipe, tuple(map(str, data.get("config_files") or ())),
                  tuple(map(str, data.get("default_spec") or ())))


def _text(data: dict, key: str) -> str:
    return str(data.get(key) or "")


def load_toolchain(data: dict) -> Toolchain:
    """One `toolchain:` section; a missing field or a wrong type raises KeyError/TypeError/ValueError."""
    missing = data.get("missing") or ()
    missing = [missing] if isinstance(missing, dict) else missing
    return Toolchain(
        name=str(data["name"]), order=int(data.get("order", 100)), detect=tuple(map(str, data["detect"])),
        requires_any=tuple(map(str, data.get("requires_any") or ())), evidence=tuple(map(str, data.get("evidence") or ())),
        test_markers=_rules(data.get("test_markers")),
        packages=tuple(map(str, data.get("packages") or ())), install=_text(data, "install"),
        env=tuple((str(k), str(v)) for k, v in (data.get("env") or {}).items()),
        version_command=_text(data, "version_command"), versions=_rules(data.get("versions")),
        version_install=_text(data, "version_install"), default_version=_text(data, "default_version"),
        packaged_version=_text(data, "packaged_version"),
        variants=tuple(_variant(variant) for variant in data.get("variants") or ()),
        dependency_files=tuple(map(str, data.get("dependency_files") or ())), hide=tuple(map(str, data.get("hide") or ())),
        fetch=_text(data, "fetch"), fetch_trusted=_text(data, "fetch_trusted"), build=_text(data, "build"),
        missing=tuple(Missing(str(rule["pattern"]), str(rule["fetch"])) for rule in missing),
        test_command=_text(data, "test_command"), test_report=_report(data.get("test_report")),
        runners=tuple(_runner(runner) for runner in data.get("runners") or ()),
        runners_from=_text(data, "runners_from"),
    )



@cache
def toolchains() -> tuple[Toolchain, ...]:
    """Every language's toolchain, in detection order; a malformed section says which language's file."""
    found = []
    for spec in LANGUAGES:
        if spec.toolchain:
            try:
                found.append(load_toolchain(dict(spec.toolchain)))
            except (KeyError, TypeError, ValueError, AttributeError) as error:
                raise ValueError(f"languages/: the toolchain of {spec.name!r} is not valid "
                                 f"({type(error).__name__}: {error})") from error
    return tuple(sorted(found, key=lambda tool: tool.order))
