"""Match what an issue mentions (paths, dotted module names) against a repository's files."""

from __future__ import annotations

from collections.abc import Iterable

from .index import module_parts

_SOURCE_ROOTS = frozenset({"src", "lib", "python"})


class PathResolver:
    def __init__(self, paths: Iterable[str]):
        self.paths = sorted(set(paths))
        self._known = set(self.paths)
        self._by_basename: dict[str, list[str]] = {}
        self._by_module: dict[tuple[str, ...], str] = {}
        for path in self.paths:
            self._by_basename.setdefault(path.rsplit("/", 1)[-1], []).append(path)
            parts = tuple(module_parts(path))
            self._by_module.setdefault(parts, path)
            if len(parts) > 1 and parts[0] in _SOURCE_ROOTS:  # src/ layout: import without it
                self._by_module.setdefault(parts[1:], path)

    def resolve(self, mentioned: str, max_ambiguous: int = 3) -> list[str]:
        """Repository files a mentioned path most likely means (empty when none).

        Absolute paths (tracebacks from installed packages) match on their longest tail that
        names a repository file with at least one folder; a bare file name matches when it is
        unambiguous enough.
        """
        path = mentioned.replace("\\", "/").strip()
        if path in self._known:
            return [path]
        if "site-packages/" in path:
            path = path.rsplit("site-packages/", 1)[1]
        parts = [p for p in path.split("/") if p and p not in (".", "..")]
        if not parts:
            return []
        candidates = self._by_basename.get(parts[-1], [])
        if not candidates:
            return []
        # Longest matching tail wins: try the full path, then drop leading folders.
        for start in range(len(parts) - 1):
            tail = "/".join(parts[start:])
            hits = [c for c in candidates if c == tail or c.endswith("/" + tail)]
            if hits:
                return hits[:max_ambiguous] if len(hits) <= max_ambiguous else []
        if len(parts) == 1 and len(candidates) <= max_ambiguous:
            return list(candidates)
        return []

    def resolve_dotted(self, dotted: str) -> tuple[str, list[str]] | None:
        """`pkg.mod.Class.meth` -> ("pkg/mod.py", ["Class", "meth"]) for the longest module prefix."""
        parts = dotted.split(".")
        for end in range(len(parts), 0, -1):
            path = self._by_module.get(tuple(parts[:end]))
            if path is not None:
                return path, parts[end:]
        return None

    def resolve_import(self, importer: str, module: str) -> str | None:
        """The file a module path imported by `importer` names (relative imports included)."""
        level = len(module) - len(module.lstrip("."))
        rest = [p for p in module[level:].split(".") if p]
        if level:
            package = importer.split("/")[:-1]
            if level > 1:
                package = package[: len(package) - (level - 1)]
            parts = tuple(package + rest)
        else:
            parts = tuple(rest)
        return self._by_module.get(parts) if parts else None
