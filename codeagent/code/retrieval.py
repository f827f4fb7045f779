"""BM25 (bm25s) over code chunks: one chunk per function/class (its own lines, without nested
definitions) and one per module (top-level code), each also carrying its qualified name and
file path as tokens.

Identifiers are split the way people search for them: `get_user_name` and `getUserName` both
yield `get`, `user`, `name` plus the whole identifier.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .index import RepoIndex
from .outline import Symbol
from .tags import FileTags

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

_STOPWORDS_TEXT = (
    """a an and are as at be but by for from has have if in into is it its of on or that the their then
    there these they this to was were will with not no we you i me my our can could should would do
    does did been being so than too very just also only any some such when where which while who
    whom why how what all each other more most own same both few self cls def class return import
    none true false elif else try except finally raise pass lambda yield assert del global nonlocal
    async await"""
)
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())


def split_identifier(word: str) -> list[str]:
    parts: list[str] = []
    for piece in word.split("_"):
        if piece:
            parts.extend(p.lower() for p in _CAMEL.findall(piece))
    return parts


@lru_cache(maxsize=200_000)
def _word_tokens(word: str) -> tuple[str, ...]:
    lower = word.lower()
    parts = split_identifier(word)
    if len(parts) > 1 or (parts and parts[0] != lower):
        head = () if lower in STOPWORDS else (lower,)
        return head + tuple(p for p in parts if len(p) > 1 and p not in STOPWORDS)
    return (lower,) if len(lower) > 1 and lower not in STOPWORDS else ()


def code_tokens(text: str) -> list[str]:
    """Lower-case search tokens for code or prose (stopwords and 1-letter tokens dropped)."""
    tokens: list[str] = []
    for word in _WORD.findall(text):
        tokens.extend(_word_tokens(word))
    return tokens


def path_tokens(path: str) -> list[str]:
    return code_tokens(re.sub(r"\.pyi?$", "", path).replace("/", " ").replace("-", "_"))


@dataclass(frozen=True)
class Chunk:
    path: str
    qualname: str | None  # None for the module-level chunk
    start_line: int
    end_line: int


def own_spans(symbols: tuple[Symbol, ...], total_bytes: int) -> list[tuple[Symbol | None, list[tuple[int, int]]]]:
    """For the module and each symbol, the byte ranges that belong to it and to none of the
    definitions nested inside it (so the chunks partition the file)."""
    children: dict[str | None, list[Symbol]] = {}
    for s in symbols:
        children.setdefault(s.parent, []).append(s)
    result = []
    for owner in [None, *symbols]:
        lo, hi = (0, total_bytes) if owner is None else (owner.start_byte, owner.end_byte)
        key = None if owner is None else owner.qualname
        spans, cursor = [], lo
        for child in sorted(children.get(key, []), key=lambda c: c.start_byte):
            if child.start_byte < lo or child.end_byte > hi:
                continue
            if child.start_byte > cursor:
                spans.append((cursor, child.start_byte))
            cursor = max(cursor, child.end_byte)
        if hi > cursor:
            spans.append((cursor, hi))
        result.append((owner, spans))
    return result


def file_chunks(path: str, source: bytes, tags: FileTags) -> list[tuple[Chunk, list[str]]]:
    """Chunks of one file with their tokens; every chunk also carries its file's path tokens
    (measured: +8 points recall@5 over path tokens in the module chunk only)."""
    out: list[tuple[Chunk, list[str]]] = []
    in_path = path_tokens(path)
    for owner, spans in own_spans(tags.symbols, len(source)):
        text = "\n".join(source[a:b].decode("utf-8", errors="replace") for a, b in spans)
        if owner is None:
            chunk = Chunk(path, None, 1, max(tags.line_count, 1))
            tokens = in_path + code_tokens(text)
        else:
            chunk = Chunk(path, owner.qualname, owner.start_line, owner.end_line)
            tokens = in_path + code_tokens(owner.qualname.replace(".", " ")) + code_tokens(text)
        out.append((chunk, tokens))
    return out


class ChunkIndex:
    """BM25 over every chunk of a repository index."""

    def __init__(self, index: RepoIndex, token_cache: dict | None = None):
        import bm25s  # a few hundred ms: only when retrieval is used

        self.chunks: list[Chunk] = []
        corpus: list[list[str]] = []
        cache = token_cache if token_cache is not None else {}
        for path, tags in index.files.items():
            digest = index.digests.get(path)
            key = (path, digest)
            entry = cache.get(key) if digest else None
            if entry is None:
                source = index.read_bytes(path)
                entry = file_chunks(path, source, tags)
                if digest:
                    cache[key] = entry
            for chunk, tokens in entry:
                self.chunks.append(chunk)
                corpus.append(tokens or ["<empty>"])
        self.paths = sorted(index.files)
        self._ids = {p: i for i, p in enumerate(self.paths)}
        self._chunk_file = np.array([self._ids[c.path] for c in self.chunks], dtype=np.int64)
        self.retriever = bm25s.BM25()
        if corpus:
            self.retriever.index(corpus, show_progress=False)

    def chunk_scores(self, query_tokens: Iterable[str]) -> np.ndarray:
        query = list(dict.fromkeys(query_tokens))
        if not self.chunks or not query:
            return np.zeros(len(self.chunks))
        return np.asarray(self.retriever.get_scores(query), dtype=np.float64)

    def file_scores(self, scores: np.ndarray, top: int = 3) -> dict[str, float]:
        """Per file, the sum of its `top` best chunk scores (measured better than the best chunk
        alone: a file that matches in several functions is more likely the one). Files without a
        positive score are left out."""
        if not len(scores):
            return {}
        order = np.lexsort((-scores, self._chunk_file))  # by file, best chunk first
        files = self._chunk_file[order]
        starts = np.r_[0, np.flatnonzero(np.diff(files)) + 1]
        rank_in_file = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
        keep = order[rank_in_file < top]
        sums = np.bincount(self._chunk_file[keep], weights=scores[keep], minlength=len(self.paths))
        return {self.paths[i]: float(sums[i]) for i in np.nonzero(sums > 0)[0]}

    def top_chunks(self, scores: np.ndarray, path: str, limit: int = 5) -> list[tuple[Chunk, float]]:
        ids = np.nonzero(self._chunk_file == self._ids[path])[0]
        ranked = sorted(((self.chunks[i], float(scores[i])) for i in ids if scores[i] > 0), key=lambda x: -x[1])
        return ranked[:limit]
