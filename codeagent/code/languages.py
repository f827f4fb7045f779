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
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path, PurePath
from typing import Any

import yaml
from tree_sitter import Language

from ..assets import asset_dir


class LanguageUnavailable(RuntimeError):
    """No grammar could be loaded for a language (neither its wheel nor the language pack)."""


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
    # the `toolchain:` section as written: the harness's to read (harness/specs/toolchains.py)
    toolchain: Mapping[str, Any] | None = field(default=None, hash=False, compare=False)


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
            toolchain=data.get("toolchain") or None,
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
