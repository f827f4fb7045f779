"""Which tests to run for a task, and the full test command.

The directives are the files the task's `test_patch` touches, as the official harness computes
them: the `b/` path of every `diff --git` header, minus files with a non-test extension; for Django
they become module labels for runtests.py (`tests/x/test_y.py` -> `x.test_y`), for every other
repository they stay file paths. The command is the spec's `test_cmd` followed by the directives,
run in /testbed, with `test_env` as a `VAR=value` prefix and `pre_test` commands before it.
"""

from __future__ import annotations

import shlex

from ... import patches
from ...task import Task
from .swebench import ResolvedSpec

# Endings the official harness drops from the directives ("csv" has no dot there: any name ending
# in csv is dropped).
NON_TEST_EXTS = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")


def patched_files(patch: str) -> list[str]:
    """Every path a patch touches, old and new names both, each once, in order (for resetting)."""
    return patches.files(patch)


def test_files(test_patch: str) -> list[str]:
    """The test files of a test patch: each `diff --git` b/ path without a non-test extension."""
    files: list[str] = []
    for diff in patches.parse(test_patch):
        path = diff.header[1] if diff.header else None
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
    _function.__test__ = False  # type: ignore[union-attr]
