"""Which toolchains a repository needs, by evidence (read from git objects only, never a checkout).

Every toolchain whose manifest is at the repository's top (languages/*.yaml `detect`; Python's are its
packaging files) is a candidate. The primary one is the candidate with tests of its own (a test script
that is not npm's placeholder, test files by the language's patterns) and then the most source files
(its `evidence` extensions, vendored folders aside); a tie goes to the lower `order`. The others are
installed beside it (a Python package with a package.json for its front end gets Node too, and stays
Python first). Python is the base image's: it has no layer of its own.

For each toolchain: its variant (the first whose file is there, and whose text matches `when_pattern`
when given), the version the repository states (`versions`), and its package manager's (`PM_VERSION`).
"""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePosixPath

from ...code.languages import LANGUAGES
from ...git_args import end_of_options
from ...sandbox.workspace import RepoSnapshot
from ..specs.toolchains import Toolchain, Variant, VersionRule, toolchains

MAX_FILE = 1 << 20
PYTHON = "python"
PYTHON_MANIFESTS = ("pyproject.toml", "setup.py", "setup.cfg")
PYTHON_ORDER = 25  # between Rust's and Node's: a tie of evidence goes to Go and Rust, then Python
VENDORED = re.compile(r"(^|/)(node_modules|vendor|third_party|thirdparty|third-party|external|extern|deps|dist|build|"
                      r"\.yarn|bower_components|site-packages|testdata|fixtures?)/")
NPM_PLACEHOLDER = re.compile(r"no test specified")


class RepoFiles:
    """A repository's files at one commit, listed once, read on demand (git objects only)."""

    def __init__(self, snap: RepoSnapshot):
        self.snap = snap
        self._all: list[str] | None = None
        self._read: dict[str, bytes] = {}

    def _git(self, *args: str) -> bytes:
        result = subprocess.run(["git", f"--git-dir={self.snap.git_dir}", *args], capture_output=True)
        return result.stdout if result.returncode == 0 else b""

    @property
    def all(self) -> list[str]:
        if self._all is None:
            listing = self._git("ls-tree", "-r", "-z", "--name-only", *end_of_options(), self.snap.commit)
            self._all = [name for name in listing.decode(errors="surrogateescape").split("\0") if name]
        return self._all

    @property
    def top(self) -> set[str]:
        return {path.split("/", 1)[0] for path in self.all}

    def names(self, folder: str) -> list[str]:
        prefix = folder.rstrip("/") + "/"
        return [path for path in self.all if path.startswith(prefix) and "/" not in path[len(prefix):]]

    def prefetch(self, paths: list[str]) -> None:
        """Read these files at once (one `git cat-file --batch`, not a process each)."""
        wanted = [path for path in paths if path not in self._read and path in self._tracked]
        if len(wanted) < 2:
            return
        request = "".join(f"{self.snap.commit}:{path}\n" for path in wanted).encode()
        result = subprocess.run(["git", f"--git-dir={self.snap.git_dir}", "cat-file", "--batch"], input=request,
                                capture_output=True)
        data, at = result.stdout, 0
        for path in wanted:
            end = data.find(b"\n", at)
            header = data[at:end].split()
            if end < 0 or len(header) != 3 or header[1] != b"blob":
                return  # not what was asked for: read one by one instead
            size = int(header[2])
            self._read[path] = data[end + 1:end + 1 + size][:MAX_FILE]
            at = end + 1 + size + 1

    @property
    def _tracked(self) -> set[str]:
        if not hasattr(self, "_tracked_set"):
            self._tracked_set = set(self.all)
        return self._tracked_set

    def read(self, path: str) -> bytes:
        if path not in self._read:
            self._read[path] = self._git("show", *end_of_options(), f"{self.snap.commit}:{path}")[:MAX_FILE] if path in self._tracked else b""
        return self._read[path]

    def text(self, path: str) -> str:
        return self.read(path).decode(errors="replace")

    def json(self, path: str) -> dict:
        try:
            data = json.loads(self.read(path) or b"{}")
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    def matching(self, patterns: tuple[str, ...] | list[str]) -> list[str]:
        """Tracked paths matching any pattern: a bare name anywhere, a pattern with `/` from the top."""
        names = [p for p in patterns if "/" not in p]
        paths = [p for p in patterns if "/" in p]
        return [path for path in self.all
                if any(fnmatch.fnmatchcase(PurePosixPath(path).name, p) for p in names)
                or any(fnmatch.fnmatchcase(path, p) for p in paths)]


@dataclass
class Detected:
    toolchain: Toolchain
    because: str  # the file that chose it
    variant: Variant | None = None
    version: str = ""  # the version the repository states ('' none)
    version_file: str = ""
    pm_version: str = ""  # its package manager's (the variant's `versions`, else its default)
    pm_version_file: str = ""
    sources: int = 0  # its source files (the evidence)
    tested: bool = False  # it has tests of its own

    @property
    def name(self) -> str:
        return self.toolchain.name + (f"/{self.variant.name}" if self.variant else "")

    @property
    def label(self) -> str:
        return self.name + (f" {self.version}" if self.version else "")


@dataclass
class Detection:
    """What a repository needs: its primary toolchain (None: Python, or nothing), and every toolchain to install."""

    primary: Detected | None
    installed: list[Detected] = field(default_factory=list)  # the primary first
    python: bool = False  # Python is the primary language (the base image's)


def stated(rules: tuple[VersionRule, ...], files: RepoFiles) -> tuple[str, str]:
    """(the version the first matching rule finds, its file), or ('', '')."""
    for rule in rules:
        if rule.file not in files.all:
            continue
        if rule.json:
            value: object = files.json(rule.file)
            for key in rule.json.split("."):
                value = value.get(key) if isinstance(value, dict) else None
            if not isinstance(value, str) or not value.strip():
                continue
            text = value.strip()
        else:
            text = files.text(rule.file)
        if rule.pattern:
            match = re.search(rule.pattern, text, re.M)
            if not match:
                continue
            text = rule.value or (match.group(1) if match.groups() else match.group(0))
        elif rule.value:
            text = rule.value
        if text.strip():
            return text.strip(), rule.file
    return "", ""


def variant_of(tool: Toolchain, files: RepoFiles) -> Variant | None:
    top = files.top
    for variant in tool.variants:
        if variant.when in top and (not variant.when_pattern or re.search(variant.when_pattern, files.text(variant.when), re.M)):
            return variant
    return None


def test_name_patterns(extensions: tuple[str, ...]) -> tuple[str, ...]:
    """The test file names (languages' `test_files`) of every language with one of these extensions."""
    return tuple(p for spec in LANGUAGES if set(spec.extensions) & set(extensions) for p in spec.test_files)


def _count(files: RepoFiles, extensions: tuple[str, ...]) -> tuple[int, bool]:
    """(source files with these extensions, whether some are tests), vendored folders aside."""
    wanted = tuple(extensions)
    tests = re.compile("|".join(fnmatch.translate(p) for p in test_name_patterns(wanted)) or r"(?!)")
    count, tested = 0, False
    for path in files.all:
        if path.endswith(wanted) and not VENDORED.search(path):
            count += 1
            tested = tested or bool(tests.match(PurePosixPath(path).name))
    return count, tested


def _candidate(tool: Toolchain, files: RepoFiles) -> Detected | None:
    top = files.top
    found = next((name for name in tool.detect if name in top), None)
    if found is None:
        return None
    if tool.requires_any and not any(not VENDORED.search(path) for path in files.matching(tool.requires_any)):
        return None
    variant = variant_of(tool, files)
    version, version_file = stated(tool.versions, files)
    pm_version, pm_file = stated(variant.versions, files) if variant else ("", "")
    sources, tested = _count(files, tool.evidence)
    tested = tested or bool(stated(tool.test_markers, files)[0])
    if tool.runners_from:  # a test script that is not npm's placeholder is tests of its own
        scripts = files.json(tool.runners_from).get("scripts")
        script = str(scripts.get("test") or "") if isinstance(scripts, dict) else ""
        tested = tested or bool(script.strip() and not NPM_PLACEHOLDER.search(script))
    return Detected(tool, found, variant, version, version_file, pm_version or (variant.default_version if variant else ""),
                    pm_file, sources, tested or not tool.evidence)


def _python(files: RepoFiles) -> tuple[int, bool] | None:
    if not any(name in files.top for name in PYTHON_MANIFESTS):
        return None
    return _count(files, (".py",))


def detect_all(snap: RepoSnapshot) -> Detection:
    """The repository's toolchains by evidence (the module docstring)."""
    return _detect_all(snap.git_dir, snap.commit, snap)


@lru_cache(maxsize=64)
def _detect_all(git_dir, commit: str, snap: RepoSnapshot) -> Detection:
    files = RepoFiles(snap)
    found = [candidate for tool in toolchains() if (candidate := _candidate(tool, files)) is not None]
    python = _python(files)
    ranked: list[tuple[tuple, Detected | None]] = [
        ((item.tested, item.sources, -item.toolchain.order), item) for item in found]
    if python is not None:
        ranked.append(((python[1], python[0], -PYTHON_ORDER), None))
    if not ranked:
        return Detection(None)
    ranked.sort(key=lambda pair: pair[0], reverse=True)
    primary = ranked[0][1]
    installed = ([primary] if primary else []) + [item for item in found if item is not primary]
    return Detection(primary, installed, python=primary is None)


def detect(snap: RepoSnapshot) -> Detected | None:
    """The repository's primary toolchain, or None (Python on the base image, or nothing detected)."""
    return detect_all(snap).primary
