"""The Docker backend: one container per sandbox, one long-lived bash inside it.

The container runs the workspace image of the repository (sandbox/workspace_image.py) with the limits
(memory, pids, cpus, disk, no network unless asked), few capabilities and no new privileges; commands go
through FIFOs in a read-only host directory, else the attach stream. Recovery from runaways and the disk cap
are in sandbox/docker_recovery.py, the labels in sandbox/labels.py.
"""

from __future__ import annotations

import atexit
import errno
import io
import os
import tarfile
import tempfile
import time
import weakref

from . import disk
from .capabilities import CAPABILITIES
from .docker_recovery import FORK_FAILED, PIDS_NEAR_LIMIT, DockerRecovery
from .engine import docker_client
from .errors import ImageMissing, PatchTooLarge, SandboxDead, SandboxError, too_large_message
from .fifo import MOUNT_POINT, FifoTransport, fifo_io_possible
from .images import base_image_tag
from .iodir import make_io_dir, remove_io_dir
from .labels import HOST_LABEL, LABEL, RUN_LABEL, RUN_LABEL_ENV, owner_label, owner_labels
from .protocol import FileEntry, Limits, diff_script, list_dir_command, parse_list_dir
from .shell import CommandResult, ShellSession
from .stream import DockerTransport
from .upload import upload_through_shell
from .workspace import RepoSnapshot
from .workspace_image import WORKSPACE_IMAGE, forget_workspaces, workspace_image

# the names other modules import from here (labels, workspace_image, fifo and docker_recovery hold some)
__all__ = ["CAPABILITIES", "FORK_FAILED", "HOST_LABEL", "LABEL", "MOUNT_POINT", "PIDS_NEAR_LIMIT", "RUN_LABEL",
           "RUN_LABEL_ENV", "SHM_SIZE", "STATE_DIR", "WORKSPACE_IMAGE", "DockerSandbox", "close_all", "owner_label",
           "owner_labels", "workspace_image"]

STATE_DIR = "/tmp/.codeagent"
_open_sandboxes: weakref.WeakSet[DockerSandbox] = weakref.WeakSet()

# /dev/shm, whatever the engine's default; its pages (like /dev's, a 64 MiB tmpfs too) count
# against the container's memory limit
SHM_SIZE = "64m"


class DockerSandbox(DockerRecovery):
    """An isolated workspace: `run`, files, `diff`, `close`. Use as a context manager."""

    kind = "docker"

    def __init__(self, snapshot: RepoSnapshot, *, image: str | None = None, workdir: str = "/testbed",
                 limits: Limits | None = None, output_limit: int | None = None, prepared_image: str | None = None,
                 network_name: str | None = None, read_only: dict[str, str] | None = None):
        """`image`: the base to put the repository on (default: codeagent's base image).
        `prepared_image`: an image that already holds the repository at `workdir` as a one-commit
        repository tagged codeagent-base (the harness's instance images); used as it is.
        `read_only`: host folders mounted read-only, each at its path in the container (skills' folders)."""
        self.snapshot = snapshot
        self.workdir = workdir
        self.limits = limits or Limits()
        self._network_name = network_name  # a network of the harness's service sidecars (internal)
        self._disk_cap = disk.parse_size(self.limits.disk)
        self.image = prepared_image or workspace_image(snapshot, image or base_image_tag(), workdir)
        self._prepared = prepared_image is not None
        self._client = docker_client()
        self._environment = {"HOME": "/root", "CODEAGENT_SANDBOX": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        self._io_root = make_io_dir() if fifo_io_possible() else None
        self._io_dir = self._io_root  # None once we fall back to the attach stream
        self._generation = 0
        self._closed = True
        self._disk: disk.DiskWatch | None = None
        self._over_disk_cap = False
        self._used_when_capped = 0
        self._pending_notes: list[str] = []  # for the next command's output
        # read-only: the shell can still write to the FIFOs (EROFS covers files, dirs and links
        # only), but can create nothing on the host
        volumes = {str(self._io_dir): {"bind": MOUNT_POINT, "mode": "ro"}} if self._io_dir else {}
        self.read_only = dict(read_only or {})
        volumes.update({host: {"bind": inside, "mode": "ro"} for host, inside in self.read_only.items()})
        try:
            self.container = self._start_container(volumes or None, image or base_image_tag())
        except BaseException:
            remove_io_dir(self._io_root)
            raise
        _open_sandboxes.add(self)
        self._closed = False
        shell_options = {"output_limit": output_limit} if output_limit else {}
        self.shell = ShellSession(
            self._open_transport, state_dir=STATE_DIR, workdir=workdir, kill_children=self._kill_children,
            hard_reset=self._hard_reset, **shell_options,
        )
        self.shell.watch = (disk.NO_SPACE if self._engine_quota else disk.FILE_SIZE_EXCEEDED,)
        try:
            if not self._engine_quota:
                self._disk = disk.DiskWatch(self.container.id, self._disk_cap, self._stop_command,
                                            self._freeze, image=self.image,
                                            labels={LABEL: "disk-watch", **owner_labels()})
            try:
                self.shell.start()
            except Exception:
                if self._io_dir is None:
                    raise
                self._io_dir = None  # FIFOs do not work with this engine: use the attach stream
                self.shell.close()
                self.shell.start()
        except BaseException:
            self.close()
            raise

    def _start_container(self, volumes, base_tag: str):
        from docker.errors import ImageNotFound

        options = dict(
            init=True, network_mode=self._network_name or ("bridge" if self.limits.network else "none"),
            mem_limit=self.limits.memory, memswap_limit=self.limits.memory, pids_limit=self.limits.pids,
            nano_cpus=int(self.limits.cpus * 1e9), security_opt=["no-new-privileges"], hostname="sandbox",
            cap_drop=["ALL"], cap_add=CAPABILITIES, shm_size=SHM_SIZE,
            working_dir=self.workdir, environment=self._environment, volumes=volumes,
            labels={LABEL: "1", **owner_labels()},
        )
        try:  # create + start rather than run: run would try to pull a missing image
            container = self._create(options)
        except ImageNotFound:  # pruned since we last looked: prepare it again
            if self._prepared:
                raise ImageMissing(f"Docker image {self.image} does not exist (pruned?); build it again") from None
            forget_workspaces()
            self.image = workspace_image(self.snapshot, base_tag, self.workdir)
            container = self._create(options)
        try:
            container.start()
        except BaseException:
            container.remove(force=True)
            raise
        return container

    def _create(self, options: dict):
        """Create the container with the disk cap: the engine's quota if its storage driver has
        one, else RLIMIT_FSIZE plus DiskWatch (overlay2 on ext4 refuses `size`)."""
        from docker.errors import APIError

        choices = disk.quota_options(self._disk_cap)
        for number, extra in enumerate(choices):
            try:
                container = self._client.containers.create(self.image, ["sleep", "infinity"], **options, **extra)
            except APIError as exc:
                if number + 1 == len(choices) or not disk.is_quota_refusal(exc):
                    raise
                disk.learn_quota_support(False)
                continue
            self._engine_quota = "storage_opt" in extra
            disk.learn_quota_support(self._engine_quota)
            return container
        raise AssertionError("unreachable")

    def fresh(self) -> DockerSandbox:
        """A new sandbox, its own container, on the same image and limits: the base, not this one's files."""
        return DockerSandbox(self.snapshot, workdir=self.workdir, limits=self.limits, prepared_image=self.image,
                             network_name=self._network_name)

    @property
    def io_mode(self) -> str:
        return "fifo" if self._io_dir else "stream"

    def _open_transport(self):
        from docker.errors import DockerException

        self._generation += 1
        try:
            if self._io_dir is not None:
                return FifoTransport(self.container.id, self._io_dir, self._generation, self._environment,
                                     self.workdir)
            return DockerTransport(self.container.id, self._environment, self.workdir)
        except DockerException as exc:  # the container was removed or stopped under us
            raise SandboxDead(f"the sandbox container is gone ({exc}); start a new sandbox") from exc
        except OSError as exc:
            raise SandboxDead(f"the sandbox shell could not be started: {exc}") from exc

    # -- protocol ------------------------------------------------------------------------------

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        self._check_open()
        if self._disk is None:
            return self._run(command, timeout)
        self._disk.command_started()
        try:
            self._check_open()  # the sandbox may have been frozen just before
            return self._run(command, timeout)
        finally:
            self._disk.settled()

    def _run(self, command: str, timeout: float | None) -> CommandResult:
        started = time.monotonic()
        try:
            result = self.shell.run(command, timeout)
        finally:
            measure = self._disk is not None and self._disk.command_ended(time.monotonic() - started)
        notes, self._pending_notes = self._pending_notes, []
        notes += self._recover_from_runaways(result)
        if self._disk is not None:
            notes += self._enforce_disk_cap(result, measure or self._over_disk_cap)
        elif disk.NO_SPACE in result.seen:  # the engine's quota
            notes.append(f"[sandbox] The sandbox's disk cap of {disk.human(self._disk_cap)} may be reached: "
                         "delete files (build outputs, caches, large generated files) to continue.")
        if notes:
            result.output += ("" if not result.output or result.output.endswith("\n") else "\n") + "\n".join(notes) + "\n"
        return result

    def read_file(self, path: str, max_bytes: int | None = None) -> bytes:
        """The file's bytes; over max_bytes (the engine's size, then the stream) raises OSError(EFBIG)."""
        self._check_open()
        from docker.errors import NotFound

        target = self._abs(path)
        try:
            stream, stat = self.container.get_archive(target)
        except NotFound:
            raise FileNotFoundError(f"{path}: no such file in the sandbox") from None
        if stat.get("mode", 0) & (1 << 31):  # Go's os.ModeDir
            raise IsADirectoryError(f"{path} is a directory")
        if max_bytes is not None and stat.get("size", 0) > max_bytes:
            stream.close()
            raise OSError(errno.EFBIG, f"{path} is {stat['size']:,} bytes, over the limit of {max_bytes:,} bytes")
        with tempfile.TemporaryFile() as buffer:
            for chunk in stream:
                buffer.write(chunk)
                if max_bytes is not None and buffer.tell() > max_bytes + (1 << 20):  # grew since the stat
                    stream.close()
                    raise OSError(errno.EFBIG, f"{path} is over the limit of {max_bytes:,} bytes")
            buffer.seek(0)
            with tarfile.open(fileobj=buffer) as tar:
                member = tar.next()
                if member is None or not member.isfile():
                    raise FileNotFoundError(f"{path} is not a regular file")
                file = tar.extractfile(member)
                assert file is not None  # a regular file
                return file.read()

    def write_file(self, path: str, data: bytes | str, mode: int | None = None) -> None:
        """Write a file (creating parents); an existing file keeps its mode and owner."""
        with self._held():
            self._check_open()
            payload = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data  # lossless for patches
            upload = f"upload-{os.urandom(6).hex()}"
            upload_path = f"{STATE_DIR}/{upload}"
            if not upload_through_shell(self.shell, upload_path, payload):  # large, or no base64: the engine
                buffer = io.BytesIO()
                with tarfile.open(fileobj=buffer, mode="w") as tar:
                    info = tarfile.TarInfo(upload)
                    info.size, info.mode = len(payload), mode if mode is not None else 0o644
                    tar.addfile(info, io.BytesIO(payload))
                self.container.put_archive(STATE_DIR, buffer.getvalue())
            target = _quote(self._abs(path))
            chmod = f" && chmod {mode:o} {target}" if mode is not None else ""
            result = self.shell.run(
                f"( trap 'rm -f {upload_path}' EXIT; mkdir -p -- \"$(dirname -- {target})\" && "
                f"cat {upload_path} > {target}{chmod} )",
                timeout=60,
            )
            if result.exit_code != 0:
                raise OSError(f"could not write {path} in the sandbox: {result.output.strip()[-500:]}")

    def interrupt(self) -> None:
        """Stop the command running in the shell (from another thread), as a whole (ShellSession.interrupt)."""
        self.shell.interrupt()

    def list_dir(self, path: str = ".") -> list[FileEntry]:
        with self._held():
            result = self.shell.run(list_dir_command(self._abs(path)), timeout=60)
            return parse_list_dir(path, result)

    def diff(self, exclude: list[str] | None = None, max_bytes: int | None = None) -> str:
        with self._held():
            self._check_open()
            out = f"{STATE_DIR}/diff.patch"
            script = diff_script(self.workdir, out, exclude or [])
            if self._over_disk_cap:  # git writes its index and objects
                script = f'( ulimit -S -f "$(ulimit -H -f)"; {script} )'
            result = self.shell.run(script, timeout=300)
            running = self._processes() if result.exit_code != 0 else 0
            if running and (FORK_FAILED in result.output or running >= PIDS_NEAR_LIMIT * self.limits.pids):
                # runaways left no pid to start git with
                self.recover()
                self._pending_notes.append(self._runaway_note(running))
                result = self.shell.run(script, timeout=300)
            if result.exit_code != 0:
                raise SandboxError(f"git diff failed in the sandbox: {result.output.strip()[-1000:]}")
            try:
                data = self.read_file(out, max_bytes=max_bytes)
            except OSError as exc:
                if exc.errno != errno.EFBIG:
                    raise
                raise PatchTooLarge(too_large_message(max_bytes)) from None
            return data.decode("utf-8", errors="surrogateescape")

    def close(self) -> None:
        if getattr(self, "_closed", True):
            return
        self._closed = True
        if (watch := getattr(self, "_disk", None)) is not None:
            watch.close()
            if watch.idle_tripped:
                try:
                    self.container.unpause()
                except Exception:
                    pass
        if hasattr(self, "shell"):
            self.shell.close()
        try:
            self.container.remove(force=True)
        except Exception:
            pass
        remove_io_dir(self._io_root)
        _open_sandboxes.discard(self)

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------------------

    def _abs(self, path: str) -> str:
        return path if path.startswith("/") else f"{self.workdir}/{path}".replace("/./", "/")

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxDead("this sandbox is closed")
        if (watch := getattr(self, "_disk", None)) is not None and watch.idle_tripped:
            # background jobs went over the disk cap between commands: frozen then, stopped now
            # (the next command's check reports it)
            watch.idle_tripped = False
            self._unfreeze_and_recover()


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def close_all() -> None:
    for sandbox in list(_open_sandboxes):
        sandbox.close()


atexit.register(close_all)  # a sandbox not used as a context manager is still removed at exit
