"""What an issue text points at: file paths, stack-trace frames, and code identifiers.

Pure text analysis; matching these against a repository is `resolve.py`'s job.
"""

from __future__ import annotations

import keyword
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# A path with at least one known source extension: foo/bar.py, ./x.py, C:\a\b.py.
_PATH = re.compile(r"(?<![\w/.\\-])((?:[A-Za-z]:)?[\w.\\/-]*[\w-]+\.(?:py|pyi|pyx))\b")
# Python traceback frame.
_PY_FRAME = re.compile(r'File "([^"\n]+)", line (\d+)(?:, in ([\w<>.]+))?')
# pytest / compiler style `path.py:123: in func` or `path.py:123`.
_COLON_FRAME = re.compile(r"(?m)^\s*([\w./\\-]+\.py):(\d+)(?::\s*(?:in\s+([\w<>.]+))?)?")
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOTTED = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+\b")
_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")

# Words that look like code but say nothing about where the bug is.
_NOISE_TEXT = (
    """self cls args kwargs print len str int float bool list dict set tuple object type none true
    false isinstance getattr setattr hasattr range enumerate zip map filter sorted open super repr
    format append extend items keys values get join split strip replace lower upper min max sum abs
    any all np numpy pd pandas plt os sys re json test tests example py python pip http https www
    com org traceback error exception file line module most recent call last"""
)
_NOISE = frozenset(keyword.kwlist) | frozenset(_NOISE_TEXT.split())


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    function: str | None
    depth: int  # 0 = outermost frame of its traceback; larger = deeper (closer to the error)


@dataclass
class IssueMentions:
    paths: list[str] = field(default_factory=list)  # in order of first mention
    frames: list[Frame] = field(default_factory=list)
    # identifier -> weight (code blocks and code-looking words count more than plain prose)
    identifiers: Counter = field(default_factory=Counter)
    dotted: list[str] = field(default_factory=list)  # "pkg.mod.Class.method" as written


def is_code_like(word: str) -> bool:
    """snake_case, CamelCase/camelCase with an inner capital, dunder, or with digits."""
    if "_" in word.strip("_") or (word.startswith("__") and word.endswith("__")):
        return True
    return any(c.isupper() for c in word[1:]) and any(c.islower() for c in word)


def extract_mentions(text: str) -> IssueMentions:
    mentions = IssueMentions()
    mentions.frames = _frames(text)
    seen_paths: dict[str, None] = {}
    for frame in mentions.frames:
        seen_paths.setdefault(_clean_path(frame.path))
    for match in _PATH.finditer(text):
        seen_paths.setdefault(_clean_path(match.group(1)))
    mentions.paths = [p for p in seen_paths if p]

    weights: Any = Counter()  # float weights: typeshed's Counter holds ints only
    code_parts = [m.group(0) for m in _FENCE.finditer(text)] + _INLINE_CODE.findall(text)
    for part in code_parts:
        for word in _IDENT.findall(part):
            if _useful(word):
                weights[word] += 1.0
    prose = _INLINE_CODE.sub(" ", _FENCE.sub(" ", text))
    for word in _IDENT.findall(prose):
        if _useful(word) and is_code_like(word):
            weights[word] += 1.0
    for word in _CALL.findall(prose):
        if _useful(word):
            weights[word] += 1.0
    dotted: dict[str, None] = {}
    for name in _DOTTED.findall(text):
        if name.endswith((".py", ".pyi", ".pyx")) or name.count(".") > 8:
            continue
        dotted.setdefault(name)
        for word in name.split("."):
            if _useful(word):
                weights[word] += 0.5
    for frame in mentions.frames:
        if frame.function and _useful(frame.function):
            weights[frame.function] += 2.0
    mentions.identifiers = weights
    mentions.dotted = list(dotted)
    return mentions


def _useful(word: str) -> bool:
    return len(word) > 2 and word.lower() not in _NOISE and not word.isdigit()


def _frames(text: str) -> list[Frame]:
    frames: list[Frame] = []
    for pattern in (_PY_FRAME, _COLON_FRAME):
        depth = 0
        last_end = -1
        for m in pattern.finditer(text):
            # A new traceback starts when frames are far apart.
            depth = depth + 1 if last_end >= 0 and m.start() - last_end < 400 else 0
            last_end = m.end()
            function = m.group(3)
            frames.append(Frame(m.group(1), int(m.group(2)), function if function != "<module>" else None, depth))
    return frames


def _clean_path(path: str) -> str:
    path = path.replace("\\", "/").strip().strip("'\"`")
    while path.startswith("./"):
        path = path[2:]
    return path
