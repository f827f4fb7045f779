"""The base image: pulled from a registry when one answers, else bootstrapped from Debian packages.

The tag is derived from the spec (evals/environments/base.yaml) and the host's CA bundle, so a
changed spec or bundle builds a new image and an unchanged one builds nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..assets import asset_path
from .engine import docker_client
from .errors import ImageBuildError, ImageMissing

CA_BUNDLE_IN_IMAGE = "/etc/codeagent/ca-bundle.crt"
HOST_CA_CANDIDATES = (
    os.environ.get("SSL_CERT_FILE", ""),
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
)
Log = Callable[[str], None]


@dataclass(frozen=True)
class BaseImageSpec:
    name: str
    pull: str
    suite: str
    mirror: str
    packages: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    slim_exclude: tuple[str, ...] = ()  # dpkg path-exclude globs (base.yaml's `slim`)
    slim_include: tuple[str, ...] = ()

    python: str = ""

    @classmethod
    def load(cls, suite: str | None = None, path: Path | None = None) -> BaseImageSpec:
        """The spec for `suite` (default: the file's default suite)."""
        data = yaml.safe_load((path or asset_path("evals", "environments", "base.yaml")).read_text())
        suite = suite or data["suite"]
        if suite not in data["suites"]:
            raise ImageBuildError(f"no base image for Debian suite {suite!r}; known: {', '.join(data['suites'])}")
        return cls(
            name=data["name"],
            pull=data["suites"][suite]["pull"],
            suite=suite,
            python=str(data["suites"][suite]["python"]),
            mirror=data["mirror"],
            packages=tuple(data["packages"]),
            env={k: str(v) for k, v in (data.get("env") or {}).items()},
            slim_exclude=tuple((data.get("slim") or {}).get("exclude") or ()),
            slim_include=tuple((data.get("slim") or {}).get("include") or ()),
        )

    def slim_script(self) -> str:
        """Shell that removes the files the `slim` rules exclude (but those they include) and has dpkg
        leave them out of every package installed later, as Debian's -slim images do."""
        rules = [f"path-exclude {pattern}" for pattern in self.slim_exclude]
        rules += [f"path-include {pattern}" for pattern in self.slim_include]
        kept = " ".join(f"! -path {shlex.quote(pattern)}" for pattern in self.slim_include)
        removals = []
        for pattern in self.slim_exclude:  # files only: a folder a package's script writes into stays
            prefix = pattern.split("*", 1)[0]
            root = shlex.quote(prefix[:prefix.rfind("/")] or "/")
            removals.append(f"[ ! -d {root} ] || find {root} ! -type d -path {shlex.quote(pattern)} {kept} -delete")
        return "; ".join([f"mkdir -p /etc/dpkg/dpkg.cfg.d && printf '%s\\n' {' '.join(map(shlex.quote, rules))} "
                          "> /etc/dpkg/dpkg.cfg.d/codeagent-slim", *removals]) if rules else "true"

    @staticmethod
    def suites() -> dict[str, str]:
        """Debian suite -> its Python version, for every base image this machine can make."""
        data = yaml.safe_load(asset_path("evals", "environments", "base.yaml").read_text())
        return {suite: str(entry["python"]) for suite, entry in data["suites"].items()}

    def tag(self, ca_bundle: bytes | None) -> str:
        digest = hashlib.sha256(json.dumps(self.__dict__, sort_keys=True, default=list).encode())
        digest.update(ca_bundle or b"")
        return f"{self.name}:{self.suite}-{digest.hexdigest()[:12]}"


def host_ca_bundle() -> bytes | None:
    for candidate in HOST_CA_CANDIDATES:
        if candidate and os.path.isfile(candidate):
            return Path(candidate).read_bytes()
    return None


def image_env(spec: BaseImageSpec, with_ca: bool) -> dict[str, str]:
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", **spec.env}
    if with_ca:
        for var in ("SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"):
            env[var] = CA_BUNDLE_IN_IMAGE
    return env


def base_image_tag(spec: BaseImageSpec | None = None, suite: str | None = None) -> str:
    spec = spec or BaseImageSpec.load(suite)
    return spec.tag(host_ca_bundle())


def image_exists(tag: str) -> bool:
    from docker.errors import ImageNotFound

    try:
        docker_client().images.get(tag)
        return True
    except ImageNotFound:
        return False


def require_image(tag: str) -> str:
    if not image_exists(tag):
        raise ImageMissing(f"Docker image {tag} does not exist. Build it with `codeagent sandbox build`.")
    return tag


def build_base_image(spec: BaseImageSpec | None = None, *, suite: str | None = None, force: bool = False,
                     prefer: str = "auto", log: Log = print) -> str:
    """Make the base image if it is missing; return its tag. prefer: auto | pull | bootstrap."""
    spec = spec or BaseImageSpec.load(suite)
    ca = host_ca_bundle()
    tag = spec.tag(ca)
    if not force and image_exists(tag):
        log(f"base image {tag} is already built")
        return tag
    errors = []
    if prefer in ("auto", "pull"):
        try:
            _build_from_registry(spec, ca, tag, log)
            return tag
        except Exception as exc:  # the registry route failing is expected when air-gapped
            errors.append(f"pull {spec.pull}: {exc}")
            log(f"registry route failed ({_first_line(exc)}); bootstrapping from Debian packages")
    if prefer in ("auto", "bootstrap"):
        try:
            _bootstrap(spec, ca, tag, log)
            return tag
        except Exception as exc:
            errors.append(f"bootstrap: {exc}")
    raise ImageBuildError("could not build the base image:\n  " + "\n  ".join(errors))


def _build_from_registry(spec: BaseImageSpec, ca: bytes | None, tag: str, log: Log) -> None:
    client = docker_client()
    log(f"pulling {spec.pull}")
    client.images.pull(spec.pull)
    script = (
        "set -e; export DEBIAN_FRONTEND=noninteractive; apt-get update -qq; "
        f"apt-get install -y -qq --no-install-recommends {' '.join(spec.packages)}; rm -rf /var/lib/apt/lists/*; "
        + spec.slim_script()
    )
    container = client.containers.create(spec.pull, ["sh", "-c", script], network_mode="bridge")
    try:
        if ca:
            _put_file(container, CA_BUNDLE_IN_IMAGE, ca)
        container.start()
        status = container.wait()
        if status.get("StatusCode") != 0:
            raise ImageBuildError(container.logs().decode(errors="replace")[-2000:])
        repository, _, version = tag.rpartition(":")
        container.commit(repository=repository, tag=version, changes=_env_changes(spec, ca is not None))
    finally:
        container.remove(force=True)


def _bootstrap(spec: BaseImageSpec, ca: bytes | None, tag: str, log: Log) -> None:
    if shutil.which("debootstrap") is None:
        raise ImageBuildError("debootstrap is not installed (Debian/Ubuntu: `apt-get install debootstrap`)")
    if os.geteuid() != 0:
        raise ImageBuildError("bootstrapping an image with debootstrap needs root")
    with tempfile.TemporaryDirectory(prefix="codeagent-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        log(f"debootstrap {spec.suite} from {spec.mirror} (about a minute)")
        _check_call(["debootstrap", "--variant=minbase", f"--include={','.join(spec.packages)}",
                     spec.suite, str(rootfs), spec.mirror])
        _check_call(["chroot", str(rootfs), "apt-get", "clean"])
        _check_call(["chroot", str(rootfs), "sh", "-c", spec.slim_script()])
        shutil.rmtree(rootfs / "var/lib/apt/lists", ignore_errors=True)
        if ca:
            (rootfs / CA_BUNDLE_IN_IMAGE.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (rootfs / CA_BUNDLE_IN_IMAGE.lstrip("/")).write_bytes(ca)
        tarball = Path(tmp) / "rootfs.tar"
        log("docker import")
        _check_call(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(tarball), "."])
        repository, _, version = tag.rpartition(":")
        docker_client().api.import_image_from_file(
            str(tarball), repository=repository, tag=version, changes=_env_changes(spec, ca is not None)
        )
    if not image_exists(tag):
        raise ImageBuildError(f"docker import did not produce {tag}")
    log(f"built {tag}")


def _env_changes(spec: BaseImageSpec, with_ca: bool) -> list[str]:
    return [f"ENV {k}={v}" for k, v in image_env(spec, with_ca).items()] + ['CMD ["bash"]']


def _put_file(container, path: str, data: bytes) -> None:
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(path.lstrip("/"))
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))
    container.put_archive("/", buffer.getvalue())


def _check_call(cmd: list[str]) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise ImageBuildError(f"`{' '.join(cmd[:3])} ...` failed ({result.returncode}): "
                              f"{(result.stderr or result.stdout)[-1500:]}")


def _first_line(exc: Exception) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]
