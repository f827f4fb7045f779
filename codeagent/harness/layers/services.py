"""Services a task's tests expect on the network (requests' tests call httpbin.org), provided
offline: each is a sidecar container on an internal Docker network (no route out), reachable from
the sandbox under the host names the tests use. Declared as data in the environment spec:

    services:
      - name: httpbin
        hosts: [httpbin.org]
        pip_packages: [httpbin, gunicorn]
        command: [/opt/service/bin/gunicorn, -b, "0.0.0.0:80", httpbin:app]
        port: 80
        tls_command: [/opt/service/bin/gunicorn, -b, "0.0.0.0:443", --certfile, /opt/service/tls/server.pem,
                      --keyfile, /opt/service/tls/server.key, httpbin:app]
        tls_port: 443

A service's image is a layer on the base image (pip_packages in a venv at /opt/service), built once
and cached like the task's own layers. With `tls_command`, the image also holds a certificate for
its hosts from a test CA made at build time (/opt/service/tls: server.pem, server.key, ca.pem): the
tests trust that CA through REQUESTS_CA_BUNDLE and SSL_CERT_FILE (TLS_ENV) and the bundles named
in `ca_files` (a library's vendored cacert.pem), and nothing else answers offline.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from ...sandbox.errors import SandboxError
from ..specs.model import Service

SERVICE_IMAGE = "codeagent/service"
SERVICE_PREFIX = "/opt/service"
TLS_DIR = f"{SERVICE_PREFIX}/tls"
TLS_ENV = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE")
CA_IN_SANDBOX = "/etc/ssl/codeagent-services-ca.pem"
READY_SECONDS = 60.0


class ServiceError(SandboxError):
    pass


def service_layer(service: Service):
    import shlex

    from .layer import Layer
    from .python_env import base_image, layer_tag

    parent = base_image(service.suite)
    steps = [f"python3 -m venv {SERVICE_PREFIX}"]
    packages = [*service.pip_packages, *(["trustme==1.2.1"] if service.tls_command else [])]
    if packages:
        steps.append(f"{SERVICE_PREFIX}/bin/pip install -q {' '.join(map(shlex.quote, packages))}")
    if service.tls_command:
        hosts = " ".join(map(shlex.quote, service.hosts))
        steps.append(f"mkdir -p {TLS_DIR} && {SERVICE_PREFIX}/bin/python -m trustme -q -k RSA -d {TLS_DIR} "
                     f"--common-name {shlex.quote(service.hosts[0])} -i {hosts}")
        steps.append(f"mv {TLS_DIR}/client.pem {TLS_DIR}/ca.pem")
    script = "\n".join(steps)
    return Layer(tag=layer_tag(SERVICE_IMAGE, parent, script, {}, {}, None), parent=parent, script=script)


@contextmanager
def service_network(services: Sequence[Service]) -> Iterator[tuple[str, bytes]]:
    """An internal network with the services running and answering on their ports; yields its
    name (for the sandbox's network_mode) and the CA certificates the tests are to trust (PEM,
    empty without TLS). Everything is removed on exit."""
    from ...sandbox.docker import owner_labels
    from ...sandbox.engine import docker_client
    from .layer import BUILD_LABEL, build_layer

    client = docker_client()
    labels = {BUILD_LABEL: "service", **owner_labels()}
    images = {service.name: build_layer(service_layer(service)).tag for service in services}
    network = client.networks.create(f"codeagent-svc-{secrets.token_hex(6)}", driver="bridge", internal=True,
                                     labels=labels)
    containers = []
    try:
        for service in services:
            container = client.containers.create(
                images[service.name], service.command, init=True, network=network.name, labels=labels,
                hostname=service.name, mem_limit="1g", pids_limit=256)
            containers.append(container)
            network.disconnect(container)  # connect again with the host names the tests use
            network.connect(container, aliases=[service.name, *service.hosts])
            container.start()
            if service.tls_command:
                container.exec_run(service.tls_command, detach=True)
        cas = b""
        for service, container in zip(services, containers):
            _wait_ready(container, service, service.port)
            if service.tls_port:
                _wait_ready(container, service, service.tls_port)
                cas += _read(container, f"{TLS_DIR}/ca.pem")
        yield network.name, cas
    finally:
        for container in containers:
            try:
                container.remove(force=True)
            except Exception:
                pass
        network.remove()


def trust_script(services: Sequence[Service]) -> str:
    """Shell lines that append the test CA to each service's `ca_files` that exist."""
    import shlex

    files = [path for service in services for path in service.ca_files]
    if not files:
        return ""
    quoted = " ".join(path if "*" in path else shlex.quote(path) for path in files)  # globs expand
    return f"for f in {quoted}; do if [ -f \"$f\" ]; then cat {CA_IN_SANDBOX} >> \"$f\"; fi; done; "


def _read(container, path: str) -> bytes:
    code, output = container.exec_run(["cat", path])
    if code != 0:
        raise ServiceError(f"{path} is missing in the service image")
    return output


def _wait_ready(container, service: Service, port: int) -> None:
    probe = ["python3", "-c", f"import socket; socket.create_connection(('127.0.0.1', {port}), 1)"]
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        container.reload()
        if container.status not in ("created", "running"):
            logs = container.logs(tail=20).decode("utf-8", errors="replace")
            raise ServiceError(f"service {service.name} stopped: {logs[-800:]}")
        if container.exec_run(probe)[0] == 0:
            return
        time.sleep(0.5)
    raise ServiceError(f"service {service.name} does not answer on port {port} after {READY_SECONDS:g}s")
