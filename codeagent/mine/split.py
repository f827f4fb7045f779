"""Which side of a task a changed file belongs to: tests (the test patch) or the rest (the gold patch),
and which changes are not worth a task. The rules are data: the test file patterns of languages/*.yaml
plus the folder names and patterns below."""

from __future__ import annotations

import fnmatch
from functools import lru_cache
from pathlib import PurePosixPath

from ..code.languages import test_file_patterns

# A path with one of these folders anywhere in it is a test file (src/test/java, __tests__, tests/...).
TEST_DIRS = frozenset({"test", "tests", "testing", "__tests__", "testdata", "spec", "specs", "e2e"})
DOC_DIRS = frozenset({"doc", "docs", "documentation", "examples", "example", ".github"})
DOC_SUFFIXES = (".md", ".rst", ".txt", ".adoc", ".asciidoc", ".png", ".jpg", ".jpeg", ".gif", ".svg")
DOC_NAMES = ("readme*", "changes*", "changelog*", "history*", "news*", "license*", "authors*", "contributing*",
             "code_of_conduct*", "security*", "notice*", "copying*")
VENDORED_DIRS = frozenset({"vendor", "vendored", "_vendor", "third_party", "third-party", "thirdparty",
                           "node_modules", "external", "extern", "deps"})
LOCKFILES = frozenset({"package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "cargo.lock",
                       "go.sum", "poetry.lock", "pipfile.lock", "uv.lock", "pdm.lock", "composer.lock",
                       "gemfile.lock", "gradle.lockfile", "bun.lockb", "mix.lock", "podfile.lock"})
GENERATED = ("*.min.js", "*.min.css", "*.map", "*.pb.go", "*_pb2.py", "*_pb2_grpc.py", "*.pb.h", "*.pb.cc",
             "*.generated.*", "*_generated.*", "*.g.dart", "dist/*", "build/*")

TEST, SOURCE, DOCS, VENDORED, LOCKFILE, GENERATED_KIND = "test", "source", "docs", "vendored", "lockfile", "generated"


@lru_cache(maxsize=1)
def _test_names() -> tuple[str, ...]:
    return test_file_patterns()


def kind_of(path: str) -> str:
    """One of TEST, SOURCE, DOCS, VENDORED, LOCKFILE, GENERATED_KIND for a repository-relative path."""
    pure = PurePosixPath(path)
    folders = [part.lower() for part in pure.parts[:-1]]
    name = pure.name.lower()
    if any(folder in VENDORED_DIRS for folder in folders):
        return VENDORED
    if name in LOCKFILES:
        return LOCKFILE
    if any(fnmatch.fnmatchcase(path.lower(), pattern) or fnmatch.fnmatchcase(name, pattern) for pattern in GENERATED):
        return GENERATED_KIND
    if any(folder in TEST_DIRS for folder in folders) or any(fnmatch.fnmatchcase(pure.name, pattern)
                                                              for pattern in _test_names()):
        return TEST
    if any(folder in DOC_DIRS for folder in folders) or name.endswith(DOC_SUFFIXES) \
            or any(fnmatch.fnmatchcase(name, pattern) for pattern in DOC_NAMES):
        return DOCS
    return SOURCE


def skip_reason(kinds: dict[str, str]) -> str | None:
    """Why a commit that changes these files (path -> kind) makes no task; None: it may make one."""
    present = set(kinds.values())
    if TEST not in present:
        if len(present) == 1 and SOURCE not in present:
            return f"{next(iter(present))}-only"  # docs-only, lockfile-only, vendored-only, generated-only
        return "no test change"
    if SOURCE not in present:
        rest = present - {TEST}
        if not rest:
            return "no source change (tests only)"
        if rest <= {DOCS}:
            return "no source change (tests and docs only)"
        return f"no source change ({', '.join(sorted(rest))} only)"
    return None
