"""Which part of a task a changed file belongs to: tests (the test patch), source (the gold patch), docs
and vendored code (dropped), lockfiles and generated files (held: added to the gold patch only when the
tests need them); and which changes are not worth a task. The rules are data: the test file patterns of
languages/*.yaml plus the folder names and patterns below."""

from __future__ import annotations

import fnmatch
from functools import lru_cache
from pathlib import PurePosixPath

from ..code.languages import test_file_patterns

# A path with one of these folders anywhere in it is a test file (src/test/java, __tests__, tests/...).
TEST_DIRS = frozenset({"test", "tests", "testing", "__tests__", "__snapshots__", "__fixtures__", "testdata", "spec",
                       "specs", "e2e"})
# Docs, changelogs and news fragments (towncrier's changelog/123.bugfix), examples, CI and project files:
# no test needs them, and a solver is not asked to write them.
DOC_DIRS = frozenset({"doc", "docs", "documentation", "examples", "example", ".github", ".circleci", "changelog",
                      "changelog.d", "changes", "newsfragments", "news", "release-notes", "releasenotes"})
DOC_SUFFIXES = (".md", ".rst", ".txt", ".adoc", ".asciidoc", ".png", ".jpg", ".jpeg", ".gif", ".svg")
DOC_NAMES = ("readme*", "changes*", "changelog*", "history*", "news*", "license*", "authors*", "contributing*",
             "code_of_conduct*", "security*", "notice*", "copying*", "contributors*", "maintainers*", "funding*",
             ".travis.yml", ".gitlab-ci.yml", "appveyor.yml", ".appveyor.yml", "azure-pipelines.yml", ".cirrus.yml",
             ".pre-commit-config.yaml", ".readthedocs.y*ml", "codecov.yml", ".codecov.yml", ".mailmap",
             ".git-blame-ignore-revs", ".editorconfig", ".gitattributes", "mkdocs.yml")
# Another project's code kept in this one. By language: Go `vendor/`, npm `node_modules/`, pip's `_vendor/`
# and requests' `requests/packages/` (a `packages/` folder inside a package: at the top it is a monorepo's
# own code), C and C++ `third_party/`, `3rdparty/`, `external/`, `deps/`.
VENDORED_DIRS = frozenset({"vendor", "vendored", "_vendor", "third_party", "third-party", "thirdparty", "3rdparty",
                           "node_modules", "external", "extern", "deps", "bower_components"})
NESTED_VENDORED_DIRS = frozenset({"packages"})
LOCKFILES = frozenset({"package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "cargo.lock",
                       "go.sum", "poetry.lock", "pipfile.lock", "uv.lock", "pdm.lock", "composer.lock",
                       "gemfile.lock", "gradle.lockfile", "bun.lockb", "bun.lock", "mix.lock", "podfile.lock"})
# Pinned requirements: held as lockfiles are. Build files whose names look like docs: source.
PINS = ("requirements*.txt", "constraints*.txt", "requirements/*.txt", "requirements/*.in", "requirements*.in")
BUILD_FILES = ("cmakelists.txt", "*.cmake", "makefile*", "meson.build", "meson_options.txt")
GENERATED = ("*.min.js", "*.min.css", "*.map", "*.pb.go", "*_pb2.py", "*_pb2_grpc.py", "*.pb.h", "*.pb.cc",
             "*.generated.*", "*_generated.*", "zz_generated*", "*.g.dart", "dist/*", "build/*")

TEST, SOURCE, DOCS, VENDORED, LOCKFILE, GENERATED_KIND = "test", "source", "docs", "vendored", "lockfile", "generated"
DROPPED = frozenset({DOCS, VENDORED})  # never in a task
HELD = "held"  # lockfiles and generated files: in the gold patch only when the tests need them


@lru_cache(maxsize=1)
def _test_names() -> tuple[str, ...]:
    return test_file_patterns()


def kind_of(path: str) -> str:
    """One of TEST, SOURCE, DOCS, VENDORED, LOCKFILE, GENERATED_KIND for a repository-relative path. Of a
    test folder and a vendored one, the outer decides (tests/vendor/x is a test fixture)."""
    pure = PurePosixPath(path)
    folders = [part.lower() for part in pure.parts[:-1]]
    name = pure.name.lower()
    test_at = next((at for at, folder in enumerate(folders) if folder in TEST_DIRS), None)
    vendored_at = next((at for at, folder in enumerate(folders) if folder in VENDORED_DIRS
                        or (at and folder in NESTED_VENDORED_DIRS)), None)
    if vendored_at is not None and (test_at is None or vendored_at < test_at):
        return VENDORED
    if name in LOCKFILES or any(fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(path.lower(), pattern)
                                for pattern in PINS):
        return LOCKFILE
    if any(fnmatch.fnmatchcase(path.lower(), pattern) or fnmatch.fnmatchcase(name, pattern) for pattern in GENERATED):
        return GENERATED_KIND
    if test_at is not None or any(fnmatch.fnmatchcase(pure.name, pattern) for pattern in _test_names()):
        return TEST
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in BUILD_FILES):
        return SOURCE
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
