"""Which tests to run for a task, and the full test command.

The directives are the files the task's `test_patch` touches, as the official harness computes
them: the `b/` path of every `diff --git` header, minus files with a non-test extension; for Django
they become module labels for runtests.py (`tests/x/test_y.py` -> `x.test_y`), for every other
repository they stay file paths. The command is the spec's `test_cmd` followed by the directives,
run in /testbed, with `test_env` as a `VAR=value` prefix and `pre_test` commands before it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from ..task import Task
from .specs import ResolvedSpec

# Endings the official harness drops from the directives ("csv" has no dot there: any name ending
# in csv is dropped).
NON_TEST_EXTS = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")


@dataclass(frozen=True)
class FileDiff:
    old: str | None  # None: the file is new
    new: str | None  # None: the file is deleted
    header_b: str  # the b/ path of the `diff --git` line (what the official directives use)


def _unquote(path: str) -> str:
    """Git writes a path with unusual bytes as a C-style quoted string."""
    if len(path) >= 2 and path[0] == '"' and path[-1] == '"':
        body = path[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        return body.encode("latin-1", "replace").decode("utf-8", "replace")
    return path


def _strip_prefix(path: str, prefix: str) -> str | None:
    path = _unquote(path.split("\t")[0].rstrip())
    if path == "/dev/null":
        return None
    return path.removeprefix(prefix)


def _header_paths(line: str) -> tuple[str, str]:
    rest = line[len("diff --git "):].rstrip("\n")
    if rest.startswith('"'):
        parts = shlex.split(rest)
        if len(parts) == 2:
            return _strip_prefix(parts[0], "a/") or "", _strip_prefix(parts[1], "b/") or ""
    # Unquoted: "a/X b/Y". Take the last " b/" as the split, as the official regex does.
    index = rest.rfind(" b/")
    if index < 0:
        return rest, rest
    return rest[2:index] if rest.startswith("a/") else rest[:index], rest[index + 3:]


def file_diffs(patch: str) -> list[FileDiff]:
    """The files of a git diff, in order; reads ---/+++ lines only before a file's first hunk."""
    files: list[FileDiff] = []
    current: dict | None = None

    def flush() -> None:
        if current is not None:
            old = current["old"] if current["old_seen"] else current["a"]
            new = current["new"] if current["new_seen"] else current["b"]
            if current["new_file"]:
                old = None
            if current["deleted"]:
                new = None
            files.append(FileDiff(old=old, new=new, header_b=current["b"]))

    for line in patch.splitlines():
        if line.startswith("diff --git "):
            flush()
            a, b = _header_paths(line)
            current = {"a": a, "b": b, "old": None, "new": None, "old_seen": False, "new_seen": False,
                       "in_hunk": False, "new_file": False, "deleted": False}
        elif current is None:
            continue
        elif line.startswith("@@"):
            current["in_hunk"] = True
        elif current["in_hunk"]:
            continue
        elif line.startswith("--- "):
            current["old"], current["old_seen"] = _strip_prefix(line[4:], "a/"), True
        elif line.startswith("+++ "):
            current["new"], current["new_seen"] = _strip_prefix(line[4:], "b/"), True
        elif line.startswith("new file mode"):
            current["new_file"] = True
        elif line.startswith("deleted file mode"):
            current["deleted"] = True
        elif line.startswith("rename from "):
            current["a"] = _unquote(line[len("rename from "):])
        elif line.startswith("rename to "):
            current["b"] = _unquote(line[len("rename to "):])
    flush()
    return files


def patched_files(patch: str) -> list[str]:
    """Every path a patch touches, old and new names both, each once, in order (for resetting)."""
    paths: list[str] = []
    for diff in file_diffs(patch):
        for path in (diff.old, diff.new):
            if path and path not in paths:
                paths.append(path)
    return paths


def test_files(test_patch: str) -> list[str]:
    """The test files of a test patch: each `diff --git` b/ path without a non-test extension."""
    files: list[str] = []
    for diff in file_diffs(test_patch):
        path = diff.header_b
        if path and not path.endswith(NON_TEST_EXTS) and path not in files:
            files.append(path)
    return files


def django_label(path: str) -> str:
    """tests/x/test_y.py -> x.test_y (a module label for tests/runtests.py)."""
    return path.removesuffix(".py").removeprefix("tests/").replace("/", ".")


def test_directives(task: Task, spec: ResolvedSpec) -> list[str]:
    files = test_files(task.test_patch or "")
    if spec.directives == "django":
        return [django_label(path) for path in files]
    return files


def test_command(task: Task, spec: ResolvedSpec) -> str:
    """The full shell command that runs the task's tests, in /testbed.

    A task's own `test_command` (set by whoever made the task) is used as it is.
    """
    if task.test_command:
        return task.test_command
    prefix = " ".join(f"{name}={shlex.quote(value)}" for name, value in spec.test_env.items())
    words = [spec.test_cmd, *(shlex.quote(d) for d in test_directives(task, spec))]
    command = " ".join(word for word in [prefix, *words] if word)
    return "; ".join([*spec.pre_test, command])


# Named test_*, these would be collected by pytest when a test module imports them.
for _function in (test_command, test_directives, test_files):
    _function.__test__ = False  # type: ignore[attr-defined]
