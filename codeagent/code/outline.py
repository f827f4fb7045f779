"""Outline of a source file: its classes, functions and methods with qualified names and lines.

    outline("pkg/mod.py").symbols        -> [Symbol(qualname="Foo.bar", kind="method", ...), ...]
    outline(source=b"def f(): ...")      -> parse text directly (language defaults to Python)

Works on files with syntax errors: tree-sitter recovers, the outline lists what it could parse
and says `has_errors`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tree_sitter import Node

from .parsing import ParsedFile, matches, parse_file, parse_source

_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Symbol:
    name: str
    qualname: str  # dotted path of enclosing definitions, e.g. "Outer.Inner.method"
    kind: str  # a capture's name: "class" | "interface" | "type" | "enum" | "record" | "function" | "method" | "module"
    start_line: int  # 1-based, including decorators
    end_line: int  # 1-based, inclusive
    name_line: int  # 1-based line of the `def`/`class` keyword
    signature: str  # header on one line, e.g. "async def get(self, url: str) -> bytes:"
    depth: int = 0  # nesting level (0 = module level)
    decorators: tuple[str, ...] = ()
    start_byte: int = field(default=0, repr=False, compare=False)
    end_byte: int = field(default=0, repr=False, compare=False)

    @property
    def parent(self) -> str | None:
        return self.qualname.rpartition(".")[0] or None


@dataclass(frozen=True)
class Outline:
    path: str | None
    language: str
    symbols: tuple[Symbol, ...]
    has_errors: bool
    error_lines: tuple[int, ...] = ()

    def __iter__(self):
        return iter(self.symbols)

    def __len__(self) -> int:
        return len(self.symbols)

    def find(self, qualname: str) -> Symbol | None:
        return next((s for s in self.symbols if s.qualname == qualname), None)

    def qualnames(self) -> list[str]:
        return [s.qualname for s in self.symbols]

    def enclosing(self, line: int) -> Symbol | None:
        """The innermost symbol whose lines contain `line` (1-based)."""
        inside = [s for s in self.symbols if s.start_line <= line <= s.end_line]
        return max(inside, key=lambda s: s.depth) if inside else None

    def render(self) -> str:
        """One line per symbol, indented by nesting: `  12-30  def bar(self):`."""
        lines = [f"{self.path or '<source>'}" + (" (has syntax errors)" if self.has_errors else "")]
        for s in self.symbols:
            lines.append(f"{s.start_line:>5}-{s.end_line:<5} {'    ' * s.depth}{s.signature}")
        return "\n".join(lines)


def outline(
    path: str | Path | ParsedFile | None = None,
    *,
    source: bytes | str | None = None,
    language: str | None = None,
) -> Outline:
    """Outline a file by path, or `source` text (language from `path`'s extension, else `language`,
    else Python), or an already parsed file."""
    if isinstance(path, ParsedFile):
        parsed, label = path, None
    elif source is not None and (language or path is None):
        parsed, label = parse_source(source, language or "python"), (str(path) if path else None)
    else:
        if path is None:
            raise ValueError("outline() needs a path or source=")
        if isinstance(source, str):
            source = source.encode("utf-8")
        parsed, label = parse_file(path, source), str(path)
    return Outline(
        path=label,
        language=parsed.spec.name,
        symbols=tuple(symbols_of(parsed)),
        has_errors=parsed.has_errors,
        error_lines=tuple(parsed.error_lines()) if parsed.has_errors else (),
    )


TYPE_KINDS = frozenset({"class", "interface", "type", "enum", "record", "struct", "trait"})  # a function in one: a method


def symbols_of(parsed: ParsedFile) -> list[Symbol]:
    """All definitions in a parsed file, in source order, with qualified names."""
    spec = parsed.spec
    found: list[tuple[Node, Node, str]] = []  # (definition, name, kind)
    for _, caps in matches(spec.name, spec.definitions_query, parsed.root):
        names = caps.get("name")
        for capture, nodes in caps.items():
            if capture.startswith("definition.") and names:
                found.append((nodes[0], names[0], capture.removeprefix("definition.")))
                break
    found.sort(key=lambda item: (item[0].start_byte, -item[0].end_byte))

    by_id: dict[int, Symbol] = {}
    symbols: list[Symbol] = []
    for definition, name_node, kind in found:
        if definition.id in by_id:
            continue
        parent = _enclosing_definition(definition, by_id)
        name = parsed.text(name_node)
        if kind == "function" and parent is not None and parent.kind in TYPE_KINDS:
            kind = "method"
        outer, decorators = _with_wrappers(definition, spec.wrapper_types, parsed)
        symbol = Symbol(
            name=name,
            qualname=f"{parent.qualname}.{name}" if parent else name,
            kind=kind,
            start_line=outer.start_point[0] + 1,
            end_line=_last_line(definition),
            name_line=definition.start_point[0] + 1,
            signature=_signature(definition, spec.body_field, parsed),
            depth=parent.depth + 1 if parent else 0,
            decorators=decorators,
            start_byte=outer.start_byte,
            end_byte=definition.end_byte,
        )
        by_id[definition.id] = symbol
        symbols.append(symbol)
    return symbols


def _enclosing_definition(node: Node, by_id: dict[int, Symbol]) -> Symbol | None:
    ancestor = node.parent
    while ancestor is not None:
        if ancestor.id in by_id:
            return by_id[ancestor.id]
        ancestor = ancestor.parent
    return None


def _with_wrappers(node: Node, wrapper_types: tuple[str, ...], parsed: ParsedFile) -> tuple[Node, tuple[str, ...]]:
    """The outermost wrapper (e.g. decorated_definition) and the wrapper parts' text (decorators)."""
    outer = node
    decorators: list[str] = []
    while outer.parent is not None and outer.parent.type in wrapper_types:
        child = outer
        outer = outer.parent
        parts = [parsed.text(c) for c in outer.named_children if c.id != child.id]
        decorators = parts + decorators
    return outer, tuple(decorators)


def _last_line(node: Node) -> int:
    row, column = node.end_point
    # A node ending at column 0 ends with the newline of the previous line.
    return row if column == 0 and row > node.start_point[0] else row + 1


def _signature(definition: Node, body_field: str, parsed: ParsedFile) -> str:
    body = definition.child_by_field_name(body_field)
    end = body.start_byte if body is not None and body.start_byte > definition.start_byte else None
    if end is None:
        header = parsed.text(definition).splitlines()[0] if definition.end_byte > definition.start_byte else ""
    else:
        header = parsed.source[definition.start_byte : end].decode("utf-8", errors="replace")
    header = _WHITESPACE.sub(" ", header).strip()
    # Keep commas/parentheses tidy after joining a multi-line parameter list.
    header = header.replace("( ", "(").replace(" )", ")")
    return header
