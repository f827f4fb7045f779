"""What every sandbox backend offers, and the small pieces they share."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .shell import CommandResult
from .workspace import BASE_TAG


@dataclass(frozen=True)
class Limits:
    memory: str = "4g"
    pids: int = 1024
    cpus: float = 2.0
    network: bool = False
    disk: str = "4g"  # the container's own files (its writable layer), not the image's

    @classmethod
    def from_settings(cls, settings) -> Limits:
        """From the config's `sandbox` section (SandboxSettings)."""
        return cls(memory=settings.memory, pids=settings.pids, cpus=settings.cpus, network=settings.network,
                   disk=settings.disk)


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative to the listed directory
    kind: str  # "file" | "dir" | "link" | "other"
    size: int


@runtime_checkable
class Sandbox(Protocol):
    kind: str
    workdir: str

    def run(self, command: str, timeout: float | None = None) -> CommandResult: ...

    def read_file(self, path: str, max_bytes: int | None = None) -> bytes: ...

    def write_file(self, path: str, data: bytes | str, mode: int | None = None) -> None: ...

    def list_dir(self, path: str = ".") -> list[FileEntry]: ...

    def diff(self, exclude: list[str] | None = None, max_bytes: int | None = None) -> str:
        """The change against the base commit; over max_bytes, PatchTooLarge (it is not read)."""
        ...

    def interrupt(self) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> Sandbox: ...

    def __exit__(self, *exc_info) -> None: ...


_KINDS = {"f": "file", "d": "dir", "l": "link"}


def list_dir_command(path: str) -> str:
    quoted = shlex.quote(path)
    return (f"[ -d {quoted} ] || {{ echo \"not a directory: {path}\"; exit 2; }} 2>/dev/null; "
            f"find {quoted} -mindepth 1 -maxdepth 1 -printf '%y\\t%s\\t%P\\0' | sort -z")


def parse_list_dir(path: str, result: CommandResult) -> list[FileEntry]:
    if result.exit_code != 0:
        raise NotADirectoryError(result.output.strip() or f"cannot list {path}")
    entries = []
    for record in result.output.split("\0"):
        if record.count("\t") >= 2:
            kind, size, name = record.split("\t", 2)
            entries.append(FileEntry(path=name, kind=_KINDS.get(kind, "other"), size=int(size)))
    return entries


def diff_script(workdir: str, out: str, exclude: list[str]) -> str:
    """The workspace's change against the base commit, new and binary files included, written
    to `out`. A throwaway index is used so the agent's own `git status` is left as it was; it is copied
    with its time (`cp -p`): git compares stat times in whole seconds and re-reads a file changed in the
    second its index was written only when the index's own time says so (same size edits were lost)."""
    pathspec = " ".join(shlex.quote(f":(exclude){pattern}") for pattern in exclude)
    index = f"{out}.index"
    return (
        f"( cd {shlex.quote(workdir)} && cp -p .git/index {index} 2>/dev/null; "
        f"export GIT_INDEX_FILE={index}; git add -A -- . {pathspec} && "
        f"git diff --cached --binary --no-color --no-ext-diff {BASE_TAG} -- . {pathspec} > {out}; "
        f"s=$?; rm -f {index}; exit $s )"
    )
