"""Tags of one file: what it defines (the outline) and which identifiers it uses (references).

Everything here depends only on the file's bytes, so a `FileTags` can be cached by content digest
and shared between checkouts of the same repository at different commits.
"""

from __future__ import annotations

import bisect
import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field

from .outline import Symbol, symbols_of
from .parsing import ParsedFile, captures, matches


@dataclass(frozen=True)
class FileTags:
    language: str
    symbols: tuple[Symbol, ...]
    # identifier -> 1-based lines where it is used (definition names excluded), in source order
    references: dict[str, tuple[int, ...]]
    has_errors: bool
    line_count: int
    # modules this file imports, as written: "a.b", ".sibling", "..pkg.mod.name"
    imports: tuple[str, ...] = ()
    # name -> module it is imported from (`from a.b import c` gives {"c": "a.b"})
    imported_names: dict[str, str] = field(default_factory=dict)

    def reference_count(self, name: str) -> int:
        return len(self.references.get(name, ()))


def content_digest(source: bytes) -> str:
    return hashlib.blake2b(source, digest_size=16).hexdigest()


def extract_tags(parsed: ParsedFile) -> FileTags:
    symbols = tuple(symbols_of(parsed))
    definition_names = {(s.name_line, s.name) for s in symbols}
    spec = parsed.spec
    imports, imported_names, module_spans = _imports(parsed)
    nodes = captures(spec.name, spec.references_query, parsed.root).get("reference", [])
    lines_by_name: dict[str, list[int]] = {}
    source = parsed.source
    span_starts = [a for a, _ in module_spans]
    for node in nodes:  # in source order
        if span_starts:
            i = bisect.bisect_right(span_starts, node.start_byte) - 1
            if i >= 0 and node.start_byte < module_spans[i][1]:
                continue
        name = source[node.start_byte : node.end_byte].decode("utf-8", errors="replace")
        line = node.start_point[0] + 1
        if (line, name) in definition_names and _is_definition_name(node):
            continue
        lines_by_name.setdefault(name, []).append(line)
    return FileTags(
        language=spec.name,
        symbols=symbols,
        references={name: tuple(sorted(lines)) for name, lines in lines_by_name.items()},
        has_errors=parsed.has_errors,
        line_count=source.count(b"\n") + (0 if source.endswith(b"\n") or not source else 1),
        imports=imports,
        imported_names=imported_names,
    )


def _imports(parsed: ParsedFile) -> tuple[tuple[str, ...], dict[str, str], list[tuple[int, int]]]:
    """Imported module paths, imported names, and the byte spans of module-path text."""
    spec = parsed.spec
    if not spec.imports_query:
        return (), {}, []
    modules: dict[str, None] = {}
    names: dict[str, str] = {}
    spans: set[tuple[int, int]] = set()
    for _, caps in matches(spec.name, spec.imports_query, parsed.root):
        for node in caps.get("import.skip", []):
            spans.add((node.start_byte, node.end_byte))
        module = caps.get("import.module") or caps.get("import.from")
        if not module:
            continue
        node = module[0]
        spans.add((node.start_byte, node.end_byte))
        text = "".join(parsed.text(node).split())
        modules.setdefault(text)
        for name in caps.get("import.name", []):
            name_text = "".join(parsed.text(name).split())
            modules.setdefault(text + ("" if text.endswith(".") else ".") + name_text)
            names.setdefault(name_text.rsplit(".", 1)[-1], text)
    return tuple(modules), names, sorted(spans)


def _is_definition_name(node) -> bool:
    """The name of what is defined here: a `name` field, or a C-style declarator (`int f(...)`)."""
    parent = node.parent
    return parent is not None and node in (parent.child_by_field_name("name"), parent.child_by_field_name("declarator"))


class TagCache:
    """Bounded map from content digest to FileTags, shareable between repository indexes."""

    def __init__(self, max_entries: int = 200_000):
        self.max_entries = max_entries
        self._entries: OrderedDict[str, FileTags] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, digest: str) -> FileTags | None:
        tags = self._entries.get(digest)
        if tags is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(digest)
        return tags

    def peek(self, digest: str) -> FileTags | None:
        """Like get(), without counting a hit or miss."""
        return self._entries.get(digest)

    def put(self, digest: str, tags: FileTags) -> None:
        self._entries[digest] = tags
        self._entries.move_to_end(digest)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
