"""Localization: which files (and functions) of a repository an issue is most likely about.

    from codeagent.code.localize import localize
    for candidate in localize("/path/to/repo", issue_text, k=10):
        print(candidate.path, candidate.score, [s.qualname for s in candidate.symbols])

Three rankings of files are fused with weighted reciprocal rank fusion:
  - mentions: files the issue names (paths, stack-trace frames, dotted module paths) and files
    defining identifiers the issue uses (specific identifiers count more);
  - bm25: lexical match of the issue against function/class/module chunks (best chunk per file);
  - repomap: PageRank over the file dependency graph, personalised towards the mentions.
Test files are demoted unless the issue names them (fixes rarely live in tests).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .files import is_test_path
from .index import RepoIndex, module_parts
from .mentions import IssueMentions, extract_mentions
from .repomap import RepoMap
from .resolve import PathResolver
from .retrieval import ChunkIndex, code_tokens
from .tags import TagCache

METHODS = ("fusion", "bm25", "repomap", "mentions")


@dataclass(frozen=True)
class SymbolCandidate:
    qualname: str
    kind: str
    start_line: int
    end_line: int
    score: float


@dataclass(frozen=True)
class FileCandidate:
    path: str
    score: float
    symbols: tuple[SymbolCandidate, ...] = ()
    reasons: tuple[str, ...] = ()  # e.g. "path mentioned", "stack frame", "bm25 #2", "repomap #4"


@dataclass(frozen=True)
class FusionWeights:
    """Weighted reciprocal rank fusion: score(file) = sum of weight / (rrf_k + rank).
    Defaults chosen on SWE-bench Lite (evals/localization/README.md)."""

    mentions: float = 1.0
    bm25: float = 1.0
    repomap: float = 0.25
    rrf_k: float = 10.0  # smaller: the top of each ranking counts more
    test_file_factor: float = 0.3  # multiplies test files' score (unless the issue names them)


@dataclass
class Signals:
    """Per-file scores of each ranking for one issue (higher is better)."""

    mentions: dict[str, float]
    reasons: dict[str, list[str]]
    bm25: dict[str, float]
    repomap: dict[str, float]
    chunk_scores: np.ndarray
    named_files: set[str] = field(default_factory=set)


class Localizer:
    """Holds a repository's index, chunk index and repo map, to localize many issues."""

    def __init__(self, repo_dir: str | Path, index: RepoIndex | None = None, cache: TagCache | None = None,
                 token_cache: dict | None = None):
        self.index = index if index is not None else RepoIndex(repo_dir, cache=cache)
        self.chunks = ChunkIndex(self.index, token_cache=token_cache)
        self.repomap = RepoMap(self.index)
        self.resolver = PathResolver(self.index.files)
        self._document_frequency: Counter | None = None

    # -- the three signals ------------------------------------------------------------------

    def mention_scores(self, mentions: IssueMentions) -> tuple[dict[str, float], dict[str, list[str]], set[str]]:
        """Scores of files the issue points at, why (reasons per file), and the files it names."""
        scores: dict[str, float] = {}
        reasons: dict[str, list[str]] = {}
        named: set[str] = set()

        def add(path: str, value: float, reason: str) -> None:
            scores[path] = scores.get(path, 0.0) + value
            if reason not in reasons.setdefault(path, []):
                reasons[path].append(reason)

        frame_paths = {f.path for f in mentions.frames}
        for mentioned in mentions.paths:
            for path in self.resolver.resolve(mentioned):
                named.add(path)
                add(path, 3.0 if mentioned not in frame_paths else 1.0, "path mentioned")
        in_repo = [(f, self.resolver.resolve(f.path.replace("\\", "/"))) for f in mentions.frames]
        in_repo = [(f, paths) for f, paths in in_repo if paths]
        for i, (_frame, paths) in enumerate(in_repo):
            deepest = i == len(in_repo) - 1 or in_repo[i + 1][0].depth == 0
            for path in paths:
                add(path, 2.0 + (2.0 if deepest else 0.0), "stack frame")
        for dotted in mentions.dotted:
            hit = self.resolver.resolve_dotted(dotted)
            if hit is not None and len(module_parts(hit[0])) >= 2:  # not just the top package
                add(hit[0], 2.0, "module named")
        by_name = self.index.definitions_by_name()
        for ident, weight in mentions.identifiers.items():
            definers = sorted({d.path for d in by_name.get(ident, [])})
            if not definers or len(definers) > 8:
                continue
            share = min(weight, 3.0) * self.specificity(ident) / len(definers)
            for path in definers:
                add(path, share, f"defines {ident}")
        for dotted in mentions.dotted:
            parts = dotted.split(".")
            if len(parts) >= 2:
                for d in self.index.find_definitions(".".join(parts[-2:]), limit=5):
                    if d.symbol.qualname.endswith(".".join(parts[-2:])):
                        add(d.path, 1.5, f"defines {d.symbol.qualname}")
        return scores, reasons, named

    def specificity(self, name: str) -> float:
        """0..1: how rare a name is across the repository's files (inverse document frequency,
        normalised); a name every file uses says little about where an issue is."""
        if self._document_frequency is None:
            df: Counter = Counter()
            for tags in self.index.files.values():
                df.update(set(tags.references) | {s.name for s in tags.symbols})
            self._document_frequency = df
        n = max(len(self.index.files), 2)
        count = self._document_frequency.get(name, 0)
        return min(1.0, max(0.0, math.log(n / (count + 1)) / math.log(n)))

    def signals(self, issue_text: str, chat_files: Iterable[str] = ()) -> Signals:
        mentions = extract_mentions(issue_text)
        mention, reasons, named = self.mention_scores(mentions)
        chunk_scores = self.chunks.chunk_scores(code_tokens(issue_text))
        bm25 = self.chunks.file_scores(chunk_scores)
        idents = {i: min(w, 3.0) * self.specificity(i) for i, w in mentions.identifiers.items()}
        ranks, _ = self.repomap.rank_files(mention, idents, chat_files)
        return Signals(mention, reasons, bm25, ranks, chunk_scores, named)

    # -- rankings ---------------------------------------------------------------------------

    def rankings(self, issue_text: str, chat_files: Iterable[str] = (), weights: FusionWeights = FusionWeights(),
                 signals: Signals | None = None) -> dict[str, list[str]]:
        """Every method's file ranking (best first), for comparisons."""
        s = signals if signals is not None else self.signals(issue_text, chat_files)
        return {method: [p for p, _ in self._ranked(method, s, weights)] for method in METHODS}

    def localize(self, issue_text: str, k: int = 10, method: str = "fusion", chat_files: Iterable[str] = (),
                 weights: FusionWeights = FusionWeights(), symbols_per_file: int = 5) -> list[FileCandidate]:
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
        s = self.signals(issue_text, chat_files)
        ranked = self._ranked(method, s, weights)[:k]
        positions = {name: _positions(_sorted(getattr(s, name))) for name in ("bm25", "repomap")}
        out = []
        for path, score in ranked:
            reasons = list(s.reasons.get(path, []))
            reasons += [f"{name} #{positions[name][path] + 1}" for name in ("bm25", "repomap") if positions[name].get(path, 99) < 20]
            symbols = self._symbols(path, s.chunk_scores, set(s.reasons.get(path, [])), symbols_per_file)
            out.append(FileCandidate(path, score, symbols, tuple(reasons)))
        return out

    def _ranked(self, method: str, s: Signals, w: FusionWeights) -> list[tuple[str, float]]:
        if method != "fusion":
            return _sorted(_demote_tests(getattr(s, method), s.named_files, w.test_file_factor))
        fused: dict[str, float] = {}
        for scores, weight in ((s.mentions, w.mentions), (s.bm25, w.bm25), (s.repomap, w.repomap)):
            for rank, (path, _) in enumerate(_sorted(scores)[:200]):
                fused[path] = fused.get(path, 0.0) + weight / (w.rrf_k + rank + 1)
        return _sorted(_demote_tests(fused, s.named_files, w.test_file_factor))

    def _symbols(self, path: str, chunk_scores: np.ndarray, reasons: set[str], limit: int) -> tuple[SymbolCandidate, ...]:
        """The file's functions/classes by BM25 chunk score (scaled to 0..1), plus 1 when the issue
        names them and 1.5 when it names them qualified (`Class.method`)."""
        tags = self.index.files.get(path)
        if tags is None:
            return ()
        by_qualname = {s.qualname: s for s in tags.symbols}
        top_chunks = self.chunks.top_chunks(chunk_scores, path, limit=limit * 2)
        best = max((score for _, score in top_chunks), default=0.0) or 1.0
        scored: dict[str, float] = {c.qualname: score / best for c, score in top_chunks if c.qualname}
        for symbol in tags.symbols:
            bonus = 1.0 if f"defines {symbol.name}" in reasons else 0.0
            if "." in symbol.qualname and f"defines {symbol.qualname}" in reasons:
                bonus += 1.5
            if bonus:
                scored[symbol.qualname] = scored.get(symbol.qualname, 0.0) + bonus
        ranked = sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        return tuple(
            SymbolCandidate(q, by_qualname[q].kind, by_qualname[q].start_line, by_qualname[q].end_line, round(v, 4))
            for q, v in ranked
            if q in by_qualname
        )


def localize(repo_dir: str | Path, issue_text: str, k: int = 10, *, method: str = "fusion",
             chat_files: Iterable[str] = (), index: RepoIndex | None = None) -> list[FileCandidate]:
    """The `k` files of `repo_dir` most likely to need a change for `issue_text`, best first,
    each with its most relevant functions/classes."""
    return Localizer(repo_dir, index=index).localize(issue_text, k=k, method=method, chat_files=chat_files)


def _demote_tests(scores: Mapping[str, float], named: set[str], factor: float) -> dict[str, float]:
    return {p: v * factor if p not in named and is_test_path(p) else v for p, v in scores.items()}


def _sorted(scores: Mapping[str, float]) -> list[tuple[str, float]]:
    return sorted(((p, v) for p, v in scores.items() if v > 0), key=lambda kv: (-kv[1], kv[0]))


def _positions(ranked: list[tuple[str, float]]) -> dict[str, int]:
    return {p: i for i, (p, _) in enumerate(ranked)}
