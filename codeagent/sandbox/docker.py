"""The Docker backend: one container per sandbox, one long-lived bash inside it.

The repository is baked once into a workspace image (base image + tree + a one-commit git repo),
tagged by the tree's hash. Every sandbox on that tree is a container of that image: overlayfs
shares the files, so N sandboxes cost N thin writable layers, not N copies.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import io
import os
import socket
import tarfile
import tempfile
import threading
import time
import weakref
from pathlib import Path

from ..private_dirs import host_identity
from . import disk
from .engine import docker_client
from .errors import ImageMissing, PatchTooLarge, SandboxDead, SandboxError, WorkspaceError, too_large_message
from .fifo import MOUNT_POINT, FifoTransport, fifo_io_possible
from .images import base_image_tag, require_image
from .iodir import make_io_dir, remove_io_dir
from .protocol import FileEntry, Limits, diff_script, list_dir_command, parse_list_dir
from .shell import KILL_TREE_SCRIPT, CommandResult, ShellSession
from .stream import DockerTransport
from .upload import upload_through_shell
from .workspace import INIT_REPO_SCRIPT, WORKSPACE_RECIPE, RepoSnapshot

LABEL = "codeagent.sandbox"
HOST_LABEL = "codeagent.host"  # private_dirs.host_identity() of the owner
WORKSPACE_IMAGE = "codeagent/workspace"
RUN_LABEL, RUN_LABEL_ENV = "codeagent.run", "CODEAGENT_RUN_LABEL"  # tags the images of one run (the tests')
STATE_DIR = "/tmp/.codeagent"
_open_sandboxes: weakref.WeakSet[DockerSandbox] = weakref.WeakSet()
_workspace_lock = threading.Lock()
_known_workspaces: dict[tuple[str, str, str], str] = {}

# Capabilities kept from Docker's default set; everything else is dropped. Root in the sandbox
# must still install and build what tasks need: CHOWN, FOWNER, FSETID and DAC_OVERRIDE for apt,
# dpkg, pip, tar and `chown` in the harness's images (DAC_OVERRIDE also lets root open the 0600
# FIFOs of a non-root host user), SETUID/SETGID for apt's _apt user and `su` in test scripts, KILL
# to kill process trees of any uid (our kill-tree script), NET_BIND_SERVICE for tests that serve
# on a low port of the loopback. Dropped: MKNOD, NET_RAW, SETFCAP, SETPCAP, SYS_CHROOT,
# AUDIT_WRITE. With no-new-privileges and no writable host path, a setuid file made inside
# cannot matter outside.
CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL", "NET_BIND_SERVICE"]
PIDS_NEAR_LIMIT = 0.9
# /dev/shm, whatever the engine's default; its pages (like /dev's, a 64 MiB tmpfs too) count
# against the container's memory limit
SHM_SIZE = "64m"
FORK_FAILED = "Resource temporarily unavailable"  # EAGAIN from fork: the pids limit is spent


def workspace_image(snapshot: RepoSnapshot, base_tag: str, workdir: str) -> str:
    """The image holding `snapshot` at `workdir` on top of `base_tag`; built once, then cached."""
    from docker.errors import ImageNotFound

    key = (snapshot.tree, base_tag, workdir)
    if key in _known_workspaces:  # saves two engine round trips per sandbox start
        return _known_workspaces[key]
    client = docker_client()
    base_id = client.images.get(require_image(base_tag)).id.split(":")[-1][:12]
    tag = f"{WORKSPACE_IMAGE}:{snapshot.tree[:16]}-{base_id}-{WORKSPACE_RECIPE}"
    with _workspace_lock:
        try:
            client.images.get(tag)
            _known_workspaces[key] = tag
            return tag
        except ImageNotFound:
            pass
        with tempfile.TemporaryDirectory(prefix="codeagent-tree-") as tmp:
            tarball = Path(tmp) / "tree.tar"
            snapshot.write_tar(tarball, prefix=workdir)  # extracted at /: see write_tar
            container = client.containers.create(base_tag, ["sleep", "infinity"], network_mode="none",
                                                 labels={LABEL: "build", **owner_labels()}, init=True)
            try:
                container.start()
                _exec_checked(container, ["mkdir", "-p", workdir])
                with open(tarball, "rb") as data:
                    if not container.put_archive("/", data):
                        raise WorkspaceError(f"copying {snapshot.source} into the image failed")
                _exec_checked(container, ["sh", "-c", INIT_REPO_SCRIPT, "sh", snapshot.commit], workdir=workdir)
                repository, _, version = tag.rpartition(":")
                container.commit(repository=repository, tag=version,
                                 changes=[f"WORKDIR {workdir}"],
                                 conf={"Labels": {"codeagent.commit": snapshot.commit,
                                                  "codeagent.source": snapshot.source[:200],
                                                  **_run_label()}})
            except Exception as exc:
                if "no space left on device" in str(exc).lower():
                    raise WorkspaceError("disk full while building the workspace image: "
                                         "free space, or `codeagent sandbox prune --images`") from exc
                raise
            finally:
                container.remove(force=True)
    _known_workspaces[key] = tag
    return tag


def _run_label() -> dict[str, str]:
    value = os.environ.get(RUN_LABEL_ENV, "")
    return {RUN_LABEL: value} if value else {}


def _exec_checked(container, cmd: list[str], workdir: str | None = None) -> str:
    code, output = container.exec_run(cmd, workdir=workdir)
    text = output.decode(errors="replace")
    if code != 0:
        raise SandboxError(f"`{' '.join(cmd)[:200]}` failed in the container ({code}): {text[-1000:]}")
    return text


class DockerSandbox:
    """An isolated workspace: `run`, files, `diff`, `close`. Use as a context manager."""

    kind = "docker"

    def __init__(self, snapshot: RepoSnapshot, *, image: str | None = None, workdir: str = "/testbed",
                 limits: Limits | None = None, output_limit: int | None = None, prepared_image: str | None = None,
                 network_name: str | None = None):
        """`image`: the base to put the repository on (default: codeagent's base image).
        `prepared_image`: an image that already holds the repository at `workdir` as a one-commit
        repository tagged codeagent-base (the harness's instance images); used as it is."""
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
        volumes = {str(self._io_dir): {"bind": MOUNT_POINT, "mode": "ro"}} if self._io_dir else None
        try:
            self.container = self._start_container(volumes, image or base_image_tag())
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
            _known_workspaces.clear()
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
        elif "No space left on device" in result.output:  # the engine's quota
            notes.append(f"[sandbox] The sandbox's disk cap of {disk.human(self._disk_cap)} may be reached: "
                         "delete files (build outputs, caches, large generated files) to continue.")
        if notes:
            result.output += ("" if not result.output or result.output.endswith("\n") else "\n") + "\n".join(notes) + "\n"
        return result

    def _recover_from_runaways(self, result: CommandResult) -> list[str]:
        """After a fork bomb, or runaway background jobs, nothing can start: kill them all."""
        fork_failed = FORK_FAILED in result.output
        if not (result.timed_out or fork_failed):
            return []
        running = self._processes()  # a fork bomb's count swings as its processes die and respawn
        if running < (0.5 if fork_failed else PIDS_NEAR_LIMIT) * self.limits.pids:
            return []
        self.recover()
        return [self._runaway_note(running)]

    def _runaway_note(self, running: int) -> str:
        return (f"[sandbox] {running} processes were running, near the sandbox's limit of {self.limits.pids} "
                "(a fork bomb or runaway background jobs): every process in the sandbox was killed and the "
                "shell restarted. Files are kept; the working directory and exported variables were restored.")

    def _enforce_disk_cap(self, result: CommandResult, measure: bool) -> list[str]:
        assert self._disk is not None
        notes = []
        file_capped = result.exit_code == disk.SIGXFSZ_EXIT or "File size limit exceeded" in result.output
        if not (measure or file_capped or self._disk.tripped):
            return notes
        # what the watcher's measure found: stopping the processes (and restarting the container,
        # which writes the engine's files anew) may have freed it since
        held, freed = (self._disk.tripped_used, self._disk.tripped_deleted) if self._disk.tripped else (0, 0)
        self._disk.tripped = False
        try:
            used = self._disk.used()
        except Exception:
            return notes
        cap = disk.human(self._disk_cap)
        if file_capped and used < self._disk_cap:
            notes.append(f"[sandbox] A file reached the size limit of {cap} (the sandbox's disk cap) and the "
                         "command writing it was stopped.")
        still_over = used >= self._disk_cap and self._over_disk_cap and used <= self._used_when_capped
        if used >= self._disk_cap and not still_over:
            held, freed = used, self._disk.deleted
            self.recover()  # background writers too
            with contextlib.suppress(Exception):
                used = self._disk.used()
        if held >= self._disk_cap and used < self._disk_cap:  # the shell was restarted, without the limit below
            self._over_disk_cap, self._disk.idle_limit = False, self._disk_cap
            deleted = f", {disk.human(freed)} of it in files deleted while still open" if freed else ""
            notes.append(f"[sandbox] Disk cap reached: the sandbox held {disk.human(held)}{deleted}; the cap is "
                         f"{cap}. Every process in the sandbox was stopped, which freed the space. Files are kept.")
        elif still_over:
            notes.append(f"[sandbox] Still over the disk cap ({disk.human(used)} of {cap}): files cannot grow "
                         "until you delete some.")
        elif used >= self._disk_cap:
            # no file can grow until space is freed; writes fail with EFBIG ("File too large")
            # rather than killing the writer, the shell included
            self.shell.run("trap '' XFSZ; ulimit -S -f 0", timeout=30)
            self._over_disk_cap, self._used_when_capped = True, used
            self._disk.idle_limit = used + 2**20
            notes.append(f"[sandbox] Disk cap reached: the sandbox's files take {disk.human(used)}, the cap is {cap}. "
                         "Every process in the sandbox was stopped and files cannot grow until you delete some "
                         "(build outputs, caches, large generated files). Files are kept.")
        elif self._over_disk_cap:
            self.shell.run('ulimit -S -f "$(ulimit -H -f)"; trap - XFSZ', timeout=30)
            self._over_disk_cap = False
            self._disk.idle_limit = self._disk_cap
            notes.append(f"[sandbox] Back under the disk cap ({disk.human(used)} of {cap}): files can grow again.")
        return notes

    def _stop_command(self) -> None:
        """Kill the running command and the shell itself (the command may be a loop in the shell);
        the shell is then restarted. Called from DiskWatch's thread."""
        pid = self.shell.pid
        if not pid:
            return
        try:
            self.container.exec_run(["kill", "-STOP", str(pid)])
            self._kill_children(pid)
            self.container.exec_run(["kill", "-KILL", str(pid)])
        except Exception:
            pass

    @contextlib.contextmanager
    def _held(self):
        """The sandbox's own work in its container: DiskWatch does not freeze it meanwhile."""
        if self._disk is None:
            yield
            return
        self._disk.hold()
        try:
            self._check_open()  # frozen just before: stopped now
            yield
        finally:
            self._disk.settled()

    def _freeze(self) -> None:
        """Freeze every process of the sandbox (background writers over the disk cap while no
        command runs). Called from DiskWatch's thread; the next run() stops them."""
        try:
            self.container.pause()
        except Exception:
            pass

    def _unfreeze_and_recover(self) -> None:
        try:
            self.container.unpause()
        except Exception:
            pass
        self.recover()

    def _processes(self) -> int:
        try:
            return len(self.container.top().get("Processes") or [])
        except Exception:
            return 0

    def recover(self) -> None:
        """Kill every process in the sandbox and start a new shell (cwd and exported variables
        restored); the files are kept. For a sandbox that a runaway made unusable."""
        self._check_open()
        self._hard_reset()
        self.shell.close()
        self.shell.start(restore=True)

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
                return tar.extractfile(member).read()

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
        if getattr(self, "_disk", None) is not None:
            self._disk.close()
            if self._disk.idle_tripped:
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
        if getattr(self, "_disk", None) is not None and self._disk.idle_tripped:
            # background jobs went over the disk cap between commands: frozen then, stopped now
            # (the next command's check reports it)
            self._disk.idle_tripped = False
            self._unfreeze_and_recover()

    def _kill_children(self, pid: int, itself: bool = False) -> bool:
        """Kill the shell's process tree (`itself`: the shell too); False (so the caller resets the whole
        container) when the pids limit is nearly spent: orphaned runaways, like a fork bomb's, are not in it."""
        try:
            if self._processes() >= PIDS_NEAR_LIMIT * self.limits.pids:
                return False
            code, _ = self.container.exec_run(["sh", "-c", KILL_TREE_SCRIPT, "sh", str(pid),
                                               "itself" if itself else ""])
            return code == 0
        except Exception:
            return False

    def _hard_reset(self) -> None:
        """Kill every process in the container and start it again; files in it survive."""
        try:
            self.container.kill()
        except Exception:
            pass
        try:
            self.container.start()
        except Exception as exc:
            raise SandboxDead(f"the sandbox container could not be restarted: {exc}") from exc


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def owner_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_labels() -> dict[str, str]:
    """Who made a container, on which host and boot (prune removes those of dead owners of its own
    host) and, when set, the run it belongs to."""
    return {"codeagent.owner": owner_label(), HOST_LABEL: host_identity(), **_run_label()}


def close_all() -> None:
    for sandbox in list(_open_sandboxes):
        sandbox.close()


atexit.register(close_all)  # a sandbox not used as a context manager is still removed at exit
