"""Parse source bytes with tree-sitter, choosing the grammar by file extension.

tree-sitter recovers from syntax errors: a broken file still yields a tree (with ERROR/MISSING
nodes), so callers get everything that could be parsed plus `has_errors` and where they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tree_sitter import Node, Parser, Query, QueryCursor, Tree

from .languages import (
    LanguageSpec,
    LanguageUnavailable,
    load_language,
    spec_by_name,
    spec_for_path,
    spec_for_source,
)


@dataclass(frozen=True)
class ParsedFile:
    source: bytes
    tree: Tree
    spec: LanguageSpec

    @property
    def root(self) -> Node:
        return self.tree.root_node

    @property
    def has_errors(self) -> bool:
        return self.tree.root_node.has_error

    def error_lines(self, limit: int = 20) -> list[int]:
        """1-based lines of the first syntax errors (ERROR or MISSING nodes)."""
        lines: list[int] = []
        stack = [self.tree.root_node]
        while stack and len(lines) < limit:
            node = stack.pop()
            if not node.has_error:
                continue
            if node.is_error or node.is_missing:
                lines.append(node.start_point[0] + 1)
                continue
            stack.extend(reversed(node.children))
        return sorted(set(lines))

    def text(self, node: Node) -> str:
        return self.source[node.start_byte : node.end_byte].decode("utf-8", errors="replace")


@cache
def _parser(language: str) -> Parser:
    return Parser(load_language(language))


@cache
def compiled_query(language: str, query: str) -> Query:
    return Query(load_language(language), query)


def captures(language: str, query: str, node: Node) -> dict[str, list[Node]]:
    return QueryCursor(compiled_query(language, query)).captures(node)


def matches(language: str, query: str, node: Node) -> list[tuple[int, dict[str, list[Node]]]]:
    return QueryCursor(compiled_query(language, query)).matches(node)


def parse_source(source: bytes | str, language: str) -> ParsedFile:
    """Parse source in a named language (see `languages.LANGUAGES`)."""
    if isinstance(source, str):
        source = source.encode("utf-8")
    spec = spec_by_name(language)
    return ParsedFile(source=source, tree=_parser(spec.name).parse(source), spec=spec)


def parse_file(path: str | Path, source: bytes | None = None) -> ParsedFile:
    """Parse a file; the language comes from its extension (and, where two languages share one, its
    text: `languages.spec_for_source`). Raises LanguageUnavailable."""
    if spec_for_path(path) is None:
        raise LanguageUnavailable(f"no language registered for {Path(path).suffix or 'files without extension'}: {path}")
    if source is None:
        source = Path(path).read_bytes()
    spec = spec_for_source(path, source)
    assert spec is not None  # the extension is known (above)
    return parse_source(source, spec.name)
