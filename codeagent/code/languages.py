"""The table of languages code navigation understands.

Adding a language is adding one `LanguageSpec` entry: file extensions, where its grammar comes
from, and two tree-sitter queries (definitions, references). Nothing else branches on language.

Definition query captures:
  @definition.class / @definition.function  the whole definition node
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

import builtins
import importlib
from dataclasses import dataclass
from functools import cache
from pathlib import PurePath

from tree_sitter import Language


class LanguageUnavailable(RuntimeError):
    """No grammar could be loaded for a language (neither its wheel nor the language pack)."""


@dataclass(frozen=True)
class LanguageSpec:
    name: str  # tree-sitter-language-pack name
    extensions: tuple[str, ...]
    definitions_query: str
    references_query: str
    grammar_module: str | None = None  # standalone PyPI grammar, e.g. tree_sitter_python
    # Nodes that wrap a definition and belong to it (decorators): a definition starts at them.
    wrapper_types: tuple[str, ...] = ()
    # Field holding the body: the signature is the definition's text before it.
    body_field: str = "body"
    imports_query: str = ""
    # Names so common (builtins) that a use of them says nothing about a dependency.
    common_names: frozenset[str] = frozenset()


PYTHON = LanguageSpec(
    name="python",
    extensions=(".py", ".pyi"),
    grammar_module="tree_sitter_python",
    wrapper_types=("decorated_definition",),
    definitions_query="""
(class_definition name: (identifier) @name) @definition.class
(function_definition name: (identifier) @name) @definition.function
""",
    references_query="""
(identifier) @reference
""",
    imports_query="""
(import_statement name: (dotted_name) @import.module)
(import_statement name: (aliased_import name: (dotted_name) @import.module))
(import_from_statement module_name: (_) @import.from name: (dotted_name) @import.name)
(import_from_statement module_name: (_) @import.from name: (aliased_import name: (dotted_name) @import.name))
(import_from_statement module_name: (_) @import.from (wildcard_import))
(future_import_statement) @import.skip
""",
    common_names=frozenset(dir(builtins)) | frozenset({"self", "cls", "args", "kwargs"}),
)

LANGUAGES: tuple[LanguageSpec, ...] = (PYTHON,)

_BY_EXTENSION = {ext: spec for spec in LANGUAGES for ext in spec.extensions}
_BY_NAME = {spec.name: spec for spec in LANGUAGES}


def spec_for_path(path: str | PurePath) -> LanguageSpec | None:
    """The language of a file, by its extension; None when code navigation does not know it."""
    return _BY_EXTENSION.get(PurePath(path).suffix.lower())


def spec_by_name(name: str) -> LanguageSpec:
    try:
        return _BY_NAME[name]
    except KeyError:
        known = ", ".join(sorted(_BY_NAME))
        raise LanguageUnavailable(f"unknown language {name!r}; known: {known}") from None


def supported_extensions() -> frozenset[str]:
    return frozenset(_BY_EXTENSION)


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
            return Language(module.language())
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
