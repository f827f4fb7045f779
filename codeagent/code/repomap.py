"""Repository map: which files and definitions matter most, fitted to a token budget.

A graph of files where an edge A -> B means "A uses a name that B defines", weighted by how often
and how specific that name is. PageRank over it (personalised towards files and identifiers an
issue mentions, and towards files already in the conversation) ranks files; each file's rank then
flows along its edges to the definitions it uses, which ranks (file, definition) tags. The map
shows the best tags' signature lines, as many as fit the budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import networkx as nx

from .index import Definition, RepoIndex
from .languages import spec_by_name
from .resolve import PathResolver

TokenCounter = Callable[[str], int]

# A name defined in more files than this says little about which one is meant.
MAX_DEFINERS = 25
# Weight of an edge "A imports module B" (a specific name used once weighs about 1-3).
IMPORT_WEIGHT = 1.0


def estimate_tokens(text: str) -> int:
    """Rough token count (about 4 characters per token for code); swap in a real tokenizer
    by passing `count_tokens=` to `render_map`."""
    return (len(text) + 3) // 4


@dataclass(frozen=True)
class RankedTag:
    path: str
    definition: Definition
    score: float


def identifier_weight(name: str) -> float:
    """How much a use of `name` says about a dependency (long specific names say more)."""
    if name.startswith("__") and name.endswith("__"):
        return 0.0
    weight = 1.0
    if name.startswith("_"):
        weight *= 0.3
    if len(name) >= 8 and ("_" in name or any(c.isupper() for c in name[1:])):
        weight *= 3.0
    elif len(name) <= 3:
        weight *= 0.5
    return weight


class RepoMap:
    def __init__(self, index: RepoIndex):
        self.index = index
        self.resolver = PathResolver(index.files)
        self._definers: dict[str, list[str]] = {}
        common = set().union(*(spec_by_name(t.language).common_names for t in index.files.values())) if index.files else set()
        for name, defs in index.definitions_by_name().items():
            files = sorted({d.path for d in defs})
            if len(files) <= MAX_DEFINERS and identifier_weight(name) > 0 and name not in common:
                self._definers[name] = files

    def definers(self, name: str) -> list[str]:
        return self._definers.get(name, [])

    def _edges(self, boosted: Mapping[str, float]) -> Iterable[tuple[str, str, str | None, float]]:
        """(src, dst, name, weight) for every use in src of a name defined in dst (dst != src),
        and (src, dst, None, IMPORT_WEIGHT) for every module src imports."""
        for src, tags in self.index.files.items():
            for module in tags.imports:
                dst = self.resolver.resolve_import(src, module)
                if dst is not None and dst != src:
                    yield src, dst, None, IMPORT_WEIGHT
            external = self._external_names(src, tags)
            for name, lines in tags.references.items():
                files = self._definers.get(name)
                if not files or name in external:
                    continue
                weight = identifier_weight(name) * math.sqrt(len(lines)) * boosted.get(name, 1.0) / len(files)
                for dst in files:
                    if dst != src:
                        yield src, dst, name, weight

    def _external_names(self, src: str, tags) -> set[str]:
        """Names src imports from modules outside the repository (they cannot mean ours)."""
        out = set()
        for name, module in tags.imported_names.items():
            sep = "" if module.endswith(".") else "."
            if self.resolver.resolve_import(src, module) is None and self.resolver.resolve_import(src, module + sep + name) is None:
                out.add(name)
        return out

    def rank_files(
        self,
        mentioned_files: Mapping[str, float] | Iterable[str] = (),
        mentioned_identifiers: Mapping[str, float] | Iterable[str] = (),
        chat_files: Iterable[str] = (),
        identifier_boost: float = 10.0,
    ) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
        """PageRank of files, and rank of (file, defined name) tags.

        Personalisation: mentioned files (weights as given), chat files, and the files defining
        mentioned identifiers (shared between definers). Edges for mentioned identifiers count
        `identifier_boost` times more.
        """
        files = list(self.index.files)
        if not files:
            return {}, {}
        idents = _as_weights(mentioned_identifiers)
        boosted = {name: identifier_boost for name in idents}
        graph = nx.DiGraph()
        graph.add_nodes_from(files)
        out_weight: dict[str, float] = {}
        for src, dst, _, weight in self._edges(boosted):
            if graph.has_edge(src, dst):
                graph[src][dst]["weight"] += weight
            else:
                graph.add_edge(src, dst, weight=weight)
            out_weight[src] = out_weight.get(src, 0.0) + weight

        personal: dict[str, float] = {}
        for path, w in _as_weights(mentioned_files).items():
            if path in self.index.files:
                personal[path] = personal.get(path, 0.0) + w
        for path in chat_files:
            if path in self.index.files:
                personal[path] = personal.get(path, 0.0) + 1.0
        for name, w in idents.items():
            definers = self._definers.get(name, [])
            for path in definers:
                personal[path] = personal.get(path, 0.0) + w / len(definers)
        try:
            ranks = nx.pagerank(graph, alpha=0.85, personalization=personal or None, weight="weight")
        except nx.PowerIterationFailedConvergence:
            ranks = {f: 1.0 / len(files) for f in files}

        tag_ranks: dict[tuple[str, str], float] = {}
        for src, dst, name, weight in self._edges(boosted):
            if name is None:
                continue
            share = ranks[src] * weight / out_weight[src]
            key = (dst, name)
            tag_ranks[key] = tag_ranks.get(key, 0.0) + share
        return ranks, tag_ranks

    def ranked_tags(self, file_ranks: Mapping[str, float], tag_ranks: Mapping[tuple[str, str], float]) -> list[RankedTag]:
        """Definitions ordered by tag rank; files with rank but no used definitions follow with
        their top-level definitions, ordered by file rank."""
        by_name = self.index.definitions_by_name()
        out: list[RankedTag] = []
        seen: set[tuple[str, int]] = set()
        for (path, name), score in sorted(tag_ranks.items(), key=lambda kv: (-kv[1], kv[0])):
            for d in by_name.get(name, []):
                if d.path == path and (path, d.symbol.name_line) not in seen:
                    seen.add((path, d.symbol.name_line))
                    out.append(RankedTag(path, d, score))
        for path, rank in sorted(file_ranks.items(), key=lambda kv: (-kv[1], kv[0])):
            for symbol in self.index.files[path].symbols:
                if symbol.depth == 0 and (path, symbol.name_line) not in seen:
                    seen.add((path, symbol.name_line))
                    out.append(RankedTag(path, Definition(path, symbol), rank * 1e-3))
        return out

    def render(
        self,
        token_budget: int = 1024,
        mentioned_files: Mapping[str, float] | Iterable[str] = (),
        mentioned_identifiers: Mapping[str, float] | Iterable[str] = (),
        chat_files: Iterable[str] = (),
        count_tokens: TokenCounter = estimate_tokens,
    ) -> str:
        """The map text: the most important definitions that fit in `token_budget` tokens.
        Chat files are left out (their content is already in the conversation)."""
        file_ranks, tag_ranks = self.rank_files(mentioned_files, mentioned_identifiers, chat_files)
        chat = set(chat_files)
        tags = [t for t in self.ranked_tags(file_ranks, tag_ranks) if t.path not in chat]
        return fit_to_budget(tags, token_budget, count_tokens, expand=lambda ts: with_parents(ts, self.index))


def render_tags(tags: Iterable[RankedTag]) -> str:
    """Group tags by file (files in order of their best tag), lines in source order; methods
    bring their class line along for context."""
    files: dict[str, dict[int, str]] = {}
    for tag in tags:
        lines = files.setdefault(tag.path, {})
        symbol = tag.definition.symbol
        lines[symbol.name_line] = "    " * symbol.depth + symbol.signature
    if not files:
        return ""
    out: list[str] = []
    for path, lines in files.items():
        out.append(f"{path}:")
        for line in sorted(lines):
            out.append(f"{line:>6}│ {lines[line]}")
    return "\n".join(out) + "\n"


def with_parents(tags: list[RankedTag], index: RepoIndex) -> list[RankedTag]:
    """Add each method's enclosing classes (so `    def bar` shows under `class Foo`)."""
    out = list(tags)
    have = {(t.path, t.definition.symbol.qualname) for t in tags}
    for tag in tags:
        parent = tag.definition.symbol.parent
        while parent and (tag.path, parent) not in have:
            symbol = next((s for s in index.files[tag.path].symbols if s.qualname == parent), None)
            if symbol is None:
                break
            have.add((tag.path, parent))
            out.append(RankedTag(tag.path, Definition(tag.path, symbol), tag.score))
            parent = symbol.parent
    return out


def fit_to_budget(
    tags: list[RankedTag],
    token_budget: int,
    count_tokens: TokenCounter = estimate_tokens,
    expand: Callable[[list[RankedTag]], list[RankedTag]] | None = None,
) -> str:
    """Rendering of the longest prefix of `tags` that fits the budget (binary search on the
    prefix length; `expand` may add context tags, e.g. enclosing classes, before rendering)."""
    best = ""
    lo, hi = 1, len(tags)
    while lo <= hi and token_budget > 0:
        mid = (lo + hi) // 2
        prefix = tags[:mid]
        text = render_tags(expand(prefix) if expand else prefix)
        if count_tokens(text) <= token_budget:
            best, lo = text, mid + 1
        else:
            hi = mid - 1
    return best


def _as_weights(items: Mapping[str, float] | Iterable[str]) -> dict[str, float]:
    if isinstance(items, Mapping):
        return {k: float(v) for k, v in items.items() if v > 0}
    return {k: 1.0 for k in items}
