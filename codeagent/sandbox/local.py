"""The Local backend: bash on this machine, in a temporary copy of the repository.

NOT ISOLATED: commands run as you, with your files and network. Opt-in only (`--sandbox local`),
for users without Docker. It keeps the same protocol: persistent shell, timeouts that kill the
process tree, bounded output, files and diff against the base commit.
"""

from __future__ import annotations

import errno
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import IO, cast

from .errors import PatchTooLarge, SandboxDead, WorkspaceError, too_large_message
from .protocol import FileEntry, diff_script, list_dir_command, parse_list_dir
from .shell import KILL_TREE_SCRIPT, CommandResult, ShellSession
from .workspace import INIT_REPO_SCRIPT, WORKSPACE_RECIPE, RepoSnapshot, cache_dir

NOT_ISOLATED = "local sandbox: commands run on this machine with no isolation"
_template_lock = threading.Lock()


class LocalTransport:
    def __init__(self, workdir: str, environment: dict[str, str]):
        self.process = subprocess.Popen(
            ["bash", "--noprofile", "--norc"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, cwd=workdir, env=environment, start_new_session=True,
        )
        self.stdin, self.stdout = cast(IO[bytes], self.process.stdin), cast(IO[bytes], self.process.stdout)  # PIPEs

    def send(self, data: bytes) -> None:
        try:
            self.stdin.write(data)
            self.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def recv(self, timeout: float) -> bytes | None:
        ready, _, _ = select.select([self.stdout], [], [], max(timeout, 0))
        if not ready:
            return None
        return os.read(self.stdout.fileno(), 1 << 16)

    def exit_code(self) -> int | None:
        try:
            return self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for stream in (self.stdin, self.stdout):
            try:
                stream.close()
            except Exception:
                pass
        self.process.wait()


def workspace_template(snapshot: RepoSnapshot) -> Path:
    """A prepared one-commit repository of the tree, made once per tree in the cache."""
    template = cache_dir() / "workspaces" / f"{snapshot.tree}-{WORKSPACE_RECIPE}"
    with _template_lock:
        if (template / ".git").is_dir():
            return template
        template.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=template.parent))
        try:
            tarball = staging.with_suffix(".tar")
            snapshot.write_tar(tarball)
            (staging / "repo").mkdir()
            _run_checked(["tar", "-xf", str(tarball), "-C", str(staging / "repo")])
            tarball.unlink()
            _run_checked(["sh", "-c", INIT_REPO_SCRIPT, "sh", snapshot.commit], cwd=staging / "repo")
            os.replace(staging / "repo", template)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            staging.with_suffix(".tar").unlink(missing_ok=True)
    return template


class LocalSandbox:
    kind = "local"

    def __init__(self, snapshot: RepoSnapshot, *, output_limit: int | None = None, **_ignored):
        self.snapshot = snapshot
        self.root = Path(tempfile.mkdtemp(prefix="codeagent-local-"))
        self.workdir = str(self.root / "repo")
        self._closed = False
        try:
            _run_checked(["git", "clone", "--quiet", "--shared", "--", str(workspace_template(snapshot)), self.workdir])
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        environment = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.root), "LANG": "C.UTF-8",
            "CODEAGENT_SANDBOX": "local", "PYTHONDONTWRITEBYTECODE": "1",
        }
        options = {"output_limit": output_limit} if output_limit else {}
        self.shell = ShellSession(
            lambda: LocalTransport(self.workdir, environment), state_dir=str(self.root / ".state"),
            workdir=self.workdir, kill_children=_kill_children, hard_reset=self._hard_reset, **options,
        )
        try:
            self.shell.start()
        except BaseException:
            self.close()
            raise

    def fresh(self) -> LocalSandbox:
        """A new clone of the same base (not this one's files)."""
        return LocalSandbox(self.snapshot)

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        self._check_open()
        return self.shell.run(command, timeout)

    def read_file(self, path: str, max_bytes: int | None = None) -> bytes:
        self._check_open()
        target = self._abs(path)
        if target.is_dir():
            raise IsADirectoryError(f"{path} is a directory")
        try:
            if max_bytes is not None and (size := target.stat().st_size) > max_bytes:
                raise OSError(errno.EFBIG, f"{path} is {size:,} bytes, over the limit of {max_bytes:,} bytes")
            return target.read_bytes()
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no such file in the sandbox") from None

    def write_file(self, path: str, data: bytes | str, mode: int | None = None) -> None:
        self._check_open()
        target = self._abs(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data)  # lossless for patches
        if mode is not None:
            target.chmod(mode)

    def interrupt(self) -> None:
        """Kill the command running in the shell (from another thread), as Ctrl-C would."""
        self.shell.interrupt()

    def list_dir(self, path: str = ".") -> list[FileEntry]:
        return parse_list_dir(path, self.shell.run(list_dir_command(str(self._abs(path))), timeout=60))

    def diff(self, exclude: list[str] | None = None, max_bytes: int | None = None) -> str:
        self._check_open()
        out = self.root / ".state" / "diff.patch"
        result = self.shell.run(diff_script(self.workdir, str(out), exclude or []), timeout=300)
        if result.exit_code != 0:
            raise WorkspaceError(f"git diff failed: {result.output.strip()[-1000:]}")
        if max_bytes is not None and out.stat().st_size > max_bytes:
            raise PatchTooLarge(too_large_message(max_bytes))
        return out.read_bytes().decode("utf-8", errors="surrogateescape")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if hasattr(self, "shell"):
            self.shell.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _abs(self, path: str) -> Path:
        return Path(path) if os.path.isabs(path) else Path(self.workdir) / path

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxDead("this sandbox is closed")

    def _hard_reset(self) -> None:
        if self.shell.pid:
            try:
                os.killpg(self.shell.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _kill_children(pid: int, itself: bool = False) -> bool:
    try:
        return subprocess.run(["sh", "-c", KILL_TREE_SCRIPT, "sh", str(pid), "itself" if itself else ""],
                              timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _run_checked(cmd: list[str], cwd: Path | None = None) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise WorkspaceError(f"`{' '.join(cmd[:3])}` failed: {(proc.stderr or proc.stdout).strip()[-800:]}")
