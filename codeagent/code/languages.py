"""The table of languages code navigation understands: one YAML file each in the top-level
`languages/` folder (its README says what each field means).

Adding a language is adding one file: file extensions, where its grammar comes from, and two
tree-sitter queries (definitions, references). Nothing else branches on language.

Definition query captures:
  @definition.class / .interface / .type / .enum / .record / .function / .method / .module (a namespace)
                                            the whole definition node; the part after the dot is the kind shown
  @name                                     its name node (one per match)
Reference query captures:
  @reference                                an identifier that may name a definition elsewhere
Import query captures (optional):
  @import.module                            a whole module path (`import a.b`)
  @import.from + @import.name               `from a.b import c`: module and one imported name
  @import.skip                              text that is neither (e.g. `from __future__ import x`)
Identifiers inside module paths are not references (they name modules, not definitions).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePath

import yaml
from tree_sitter import Language

from ..assets import asset_dir


class LanguageUnavailable(RuntimeError):
    """No grammar could be loaded for a language (neither its wheel nor the language pack)."""


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
    missing: Missing | None = None
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
    return Runner(str(data["name"]), recipe, tuple(map(str, data.get("config_files") or ())))


def _text(data: dict, key: str) -> str:
    return str(data.get(key) or "")


def load_toolchain(data: dict) -> Toolchain:
    missing = data.get("missing")
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
        missing=Missing(str(missing["pattern"]), str(missing["fetch"])) if missing else None,
        test_command=_text(data, "test_command"), test_report=_report(data.get("test_report")),
        runners=tuple(_runner(runner) for runner in data.get("runners") or ()),
        runners_from=_text(data, "runners_from"),
    )


@dataclass(frozen=True)
class LanguageSpec:
    name: str  # tree-sitter-language-pack name
    extensions: tuple[str, ...]
    definitions_query: str
    references_query: str
    grammar_module: str | None = None  # standalone PyPI grammar, e.g. tree_sitter_python
    grammar_function: str = "language"  # what in grammar_module returns the grammar
    # Nodes that wrap a definition and belong to it (decorators): a definition starts at them.
    wrapper_types: tuple[str, ...] = ()
    # Field holding the body: the signature is the definition's text before it.
    body_field: str = "body"
    imports_query: str = ""
    # Names so common (builtins) that a use of them says nothing about a dependency.
    common_names: frozenset[str] = frozenset()
    # Glob patterns of file names that hold tests (`*_test.go`).
    test_files: tuple[str, ...] = ()
    # (language, markers): a file of this language whose text holds a marker is that language
    # (a `.h` header that holds C++).
    read_as: tuple[tuple[str, tuple[bytes, ...]], ...] = ()
    toolchain: Toolchain | None = None


def load_spec(path: Path) -> LanguageSpec:
    """One language's file from `languages/`; a missing field or a wrong type says which file."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        grammar = data.get("grammar") or {}
        return LanguageSpec(
            name=str(data["name"]),
            extensions=tuple(str(ext).lower() for ext in data["extensions"]),
            definitions_query=str(data["definitions"]),
            references_query=str(data["references"]),
            grammar_module=grammar.get("module"),
            grammar_function=grammar.get("function", "language"),
            wrapper_types=tuple(data.get("wrappers") or ()),
            body_field=data.get("body_field", "body"),
            imports_query=str(data.get("imports") or ""),
            # YAML reads `True`/`False` as booleans: names all the same
            common_names=frozenset(str(name) for name in data.get("common_names") or ()),
            test_files=tuple(str(pattern) for pattern in data.get("test_files") or ()),
            read_as=tuple((str(rule["language"]), tuple(str(m).encode() for m in rule["when_any"]))
                          for rule in data.get("read_as") or ()),
            toolchain=load_toolchain(data["toolchain"]) if data.get("toolchain") else None,
        )
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{path}: not a language spec ({type(error).__name__}: {error})") from error


def _load_all() -> tuple[LanguageSpec, ...]:
    return tuple(load_spec(path) for path in sorted(asset_dir("languages").glob("*.yaml")))


LANGUAGES: tuple[LanguageSpec, ...] = _load_all()

_BY_EXTENSION = {ext: spec for spec in LANGUAGES for ext in spec.extensions}
_BY_NAME = {spec.name: spec for spec in LANGUAGES}


def spec_for_path(path: str | PurePath) -> LanguageSpec | None:
    """The language of a file, by its extension; None when code navigation does not know it."""
    return _BY_EXTENSION.get(PurePath(path).suffix.lower())


def spec_for_source(path: str | PurePath, source: bytes) -> LanguageSpec | None:
    """The language of a file, by its extension, then by its text where the extension is shared."""
    spec = spec_for_path(path)
    for language, markers in spec.read_as if spec else ():
        if any(marker in source for marker in markers):
            return spec_by_name(language)
    return spec


def spec_by_name(name: str) -> LanguageSpec:
    try:
        return _BY_NAME[name]
    except KeyError:
        known = ", ".join(sorted(_BY_NAME))
        raise LanguageUnavailable(f"unknown language {name!r}; known: {known}") from None


def toolchains() -> tuple[Toolchain, ...]:
    """Every language's toolchain, in detection order."""
    return tuple(sorted((spec.toolchain for spec in LANGUAGES if spec.toolchain), key=lambda tool: tool.order))


def supported_extensions() -> frozenset[str]:
    return frozenset(_BY_EXTENSION)


@cache
def test_file_patterns() -> tuple[str, ...]:
    """Every language's patterns of test file names."""
    return tuple(dict.fromkeys(pattern for spec in LANGUAGES for pattern in spec.test_files))


@cache
def load_language(name: str) -> Language:
    """The tree-sitter grammar for a language.

    Tries the standalone grammar wheel first (works offline), then tree-sitter-language-pack,
    which in recent versions downloads grammars on first use and so may fail without network.
    """
    spec = spec_by_name(name)
    errors: list[str] = []
    if spec.grammar_module:
        try:
            module = importlib.import_module(spec.grammar_module)
            return Language(getattr(module, spec.grammar_function)())
        except Exception as exc:  # noqa: BLE001 - report every way we tried
            errors.append(f"{spec.grammar_module}: {exc}")
    try:
        import tree_sitter_language_pack as pack

        return pack.get_language(spec.name)
    except Exception as exc:  # noqa: BLE001
        errors.append(f"tree-sitter-language-pack: {exc}")
    hint = f"pip install {spec.grammar_module.replace('_', '-')}" if spec.grammar_module else ""
    raise LanguageUnavailable(
        f"no tree-sitter grammar for {name}: " + "; ".join(errors) + (f". Try: {hint}" if hint else "")
    )
