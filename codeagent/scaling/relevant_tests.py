"""The existing tests relevant to a task, for the regression verifier: with a PASS_TO_PASS list, the
files its ids name (`path::test`, Django's `test (module.Class)`); without one, or when its ids
name no file (sympy's), test files named after the modules the candidates touch
(`test_<module>.py`) or that import them. FAIL_TO_PASS and the test patch are never read."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..git_args import end_of_options, object_id
from ..task import Task
from .normalize import is_test_file
from .scratch import touched_files

MAX_DISCOVERED_FILES = 4
_DJANGO_ID = re.compile(r"^\S+ \(([\w.]+)\)$")


def files_of_test_ids(ids: Iterable[str]) -> list[str]:
    """The test files named by test ids: `path::name` -> path; Django `name (app.module.Class)` ->
    tests/app/module.py. Ids that name no file are skipped."""
    files: list[str] = []
    for test in ids:
        path = None
        if "::" in test:
            path = test.split("::", 1)[0]
        else:
            match = _DJANGO_ID.match(test)
            if match and "." in match.group(1):
                path = "tests/" + match.group(1).rsplit(".", 1)[0].replace(".", "/") + ".py"
        if path and path.endswith(".py") and path not in files:
            files.append(path)
    return files


def source_files(patches: Iterable[str]) -> list[str]:
    """The non-test Python files the patches touch (each once, in order)."""
    found: list[str] = []
    for patch in patches:
        for item in touched_files(patch or ""):
            for path in (item.old, item.new):
                if path and path.endswith(".py") and not is_test_file(path) and path not in found:
                    found.append(path)
    return found


def discover_test_files(git_dir: str | Path, commit: str, modules: Sequence[str],
                        limit: int = MAX_DISCOVERED_FILES) -> list[str]:
    """Test files of the tree at `commit` for the given source modules. Per module: the files named
    after it (test_<module>.py, best under the module's own package; then test_<module>*.py there);
    only when there is none, the smallest test files that import it by its dotted name (a catch-all
    file importing everything is slow and says little). At most `limit` in all, round-robin."""
    object_id(commit, "commit")  # and so never an option, also to `git grep` (which takes no --end-of-options)
    listing = _git(git_dir, "ls-tree", "-r", "-l", "-z", *end_of_options(), commit)
    sizes: dict[str, int] = {}
    for line in listing.split("\0"):
        meta, _, path = line.partition("\t")
        name = path.rsplit("/", 1)[-1]
        if path.endswith(".py") and name.startswith("test") and is_test_file(path):
            size = meta.split()[-1]
            sizes[path] = int(size) if size.isdigit() else 0
    per_module: list[list[str]] = []
    for module in modules:
        parts = module[:-3].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not parts:
            continue
        stem = parts[-1]
        package_dir = "/".join(module.split("/")[:-1])
        named = []
        for path in sizes:
            name = path.rsplit("/", 1)[-1]
            near = bool(package_dir) and path.startswith(package_dir + "/")
            if name == f"test_{stem}.py":
                named.append((0 if near else 1, path))
            elif near and name.startswith(f"test_{stem}"):
                named.append((2, path))
        if named:
            per_module.append([path for _, path in sorted(named)])
            continue
        dotted_parts = parts[1:] if parts[0] in ("src", "lib") and len(parts) > 1 else parts
        if len(dotted_parts) < 2:
            continue
        dotted, parent, leaf = ".".join(dotted_parts), ".".join(dotted_parts[:-1]), dotted_parts[-1]
        grep = subprocess.run(["git", "--git-dir", str(git_dir), "grep", "-l", "-z", "-E",
                               "-e", rf"import {re.escape(dotted)}\b", "-e", rf"from {re.escape(dotted)} import",
                               "-e", rf"from {re.escape(parent)} import .*\b{re.escape(leaf)}\b",
                               commit, "--", *_test_globs()], capture_output=True, text=True, errors="surrogateescape")
        importing = {name.split(":", 1)[1] if ":" in name else name for name in grep.stdout.split("\0") if name}
        per_module.append(sorted((path for path in importing if path in sizes), key=lambda p: (sizes[p], p)))
    chosen: list[str] = []
    for depth in range(max((len(files) for files in per_module), default=0)):
        for files in per_module:
            if depth < len(files) and files[depth] not in chosen and len(chosen) < limit:
                chosen.append(files[depth])
    return chosen


def _test_globs() -> list[str]:
    return ["*test_*.py", "*_test.py", "*tests.py"]


def choose_test_files(task: Task, patches: Sequence[str] = ()) -> tuple[list[str], str]:
    """(test files, where they came from) for a task: PASS_TO_PASS's files, else discovery from the
    modules the patches touch."""
    files = files_of_test_ids(task.PASS_TO_PASS)
    if files:
        return files, "PASS_TO_PASS"
    from ..sandbox.workspace import snapshot

    snap = snapshot(task.repo, task.base_commit)
    modules = source_files(patches)
    return discover_test_files(snap.git_dir, snap.commit, modules), "touched modules"


def _git(git_dir: str | Path, *args: str) -> str:
    proc = subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True,
                          errors="surrogateescape")
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout
