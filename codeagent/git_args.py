"""The words of a git command codeagent runs on this machine, when one comes from a repository, a dataset or the
model (a commit, a ref, a path): such a word is never read as an option (`git show --output=F:x` writes F).

Three guards, each enough where it applies: `end_of_options()` goes before those words (`--end-of-options`:
git 2.24, and `rev-parse` 2.30, where only `rev-parse --verify` takes it: without `--verify` it prints it back;
`git grep` reads it as a revision, up to 2.39 at least; an older git gets nothing, and the next two still hold); object ids are
checked as hex (`object_id`); revisions that start with `-` or hold a control character are refused
(`revision`). Paths go after `--` (every git), or start with a checked object id (`{commit}:{path}`).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import MutableMapping
from functools import cache

OBJECT_ID = re.compile(r"[0-9a-f]{4,64}")
# git's repository-local variables (`git rev-parse --local-env-vars`): set by a hook, `git bisect run`, `git rebase
# -x` or a shell, they point every git command at that repository instead of the one it names (`git -C repo`,
# `--git-dir`), so codeagent would read one repository and write its commits into another
REPOSITORY_ENV = ("GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
                  "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE",
                  "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_PREFIX",
                  "GIT_INTERNAL_SUPER_PREFIX", "GIT_SHALLOW_FILE", "GIT_COMMON_DIR", "GIT_NAMESPACE")
SINCE = {"rev-parse": (2, 30)}  # when each command learned --end-of-options; the others: 2.24
DEFAULT_SINCE = (2, 24)


class GitArgumentError(ValueError):
    """A value that cannot be given to git: it would read as an option, or is not what it claims to be."""


def forget_repository_env(environ: MutableMapping[str, str]) -> list[str]:
    """Remove git's repository-local variables from `environ` (os.environ at the CLI's start): every git
    command codeagent runs, and every one its local sandbox runs, names its repository itself. Returns the
    names removed."""
    found = [name for name in REPOSITORY_ENV if name in environ]
    for name in found:
        del environ[name]
    return found


def object_id(value: str, what: str = "object id") -> str:
    """`value` when it is a (possibly abbreviated) hex object id, else GitArgumentError."""
    if not isinstance(value, str) or not OBJECT_ID.fullmatch(value):
        raise GitArgumentError(f"{what} {value!r} is not a hex object id")
    return value


def revision(value: str, what: str = "revision") -> str:
    """`value` when git can only read it as a revision (a sha, `HEAD`, a branch or tag name, `v1.2^{commit}`):
    not empty, no leading `-`, no control character. Else GitArgumentError."""
    if not isinstance(value, str) or not value or value.startswith("-") or any(ord(c) < 32 or ord(c) == 127
                                                                               for c in value):
        raise GitArgumentError(f"{what} {value!r} is not a revision (it is empty, starts with `-` or holds a "
                               "control character)")
    return value


def end_of_options(command: str = "") -> list[str]:
    """["--end-of-options"] when this machine's git knows it for `command`; [] on an older git."""
    return ["--end-of-options"] if git_version() >= SINCE.get(command, DEFAULT_SINCE) else []


@cache
def git_version() -> tuple[int, ...]:
    """This machine's git version, e.g. (2, 39, 5); (0,) when git is missing or says something else."""
    try:
        out = subprocess.run(["git", "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return (0,)
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(part) for part in match.groups() if part is not None) if match else (0,)
