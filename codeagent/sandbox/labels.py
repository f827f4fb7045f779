"""The labels codeagent puts on its containers and images: that they are codeagent's, who made them (host,
boot, process), and the run they belong to. `codeagent sandbox prune` reads them back."""

from __future__ import annotations

import os
import socket

from ..private_dirs import host_identity

LABEL = "codeagent.sandbox"
HOST_LABEL = "codeagent.host"  # private_dirs.host_identity() of the owner
RUN_LABEL, RUN_LABEL_ENV = "codeagent.run", "CODEAGENT_RUN_LABEL"  # tags the images of one run (the tests')


def run_label() -> dict[str, str]:
    value = os.environ.get(RUN_LABEL_ENV, "")
    return {RUN_LABEL: value} if value else {}


def owner_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_labels() -> dict[str, str]:
    """Who made a container, on which host and boot (prune removes those of dead owners of its own
    host) and, when set, the run it belongs to."""
    return {"codeagent.owner": owner_label(), HOST_LABEL: host_identity(), **run_label()}
