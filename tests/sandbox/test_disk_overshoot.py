"""The disk cap on an engine without a quota (overlay2 on ext4) bounds what a sandbox writes past it by the free-space
probe (disk.py), not by the interval of its measures: with measures far apart (a big layer makes each slow, and
the interval is 20 times a measure), a writer of files deleted while held open is still stopped near the cap,
frozen while it is measured and killed while frozen; the sandbox stays usable. On 0972c8d the same writer wrote
its 512 MiB to the end under a 64 MiB cap (bench/disk_overshoot.py measures the overshoot of both)."""

from __future__ import annotations

import re

import pytest

from codeagent.sandbox import disk, open_sandbox
from codeagent.sandbox.protocol import Limits

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("no_leaks")]

WRITER = r"""python3 - <<'EOF'
import os
held, chunk = [], b"x" * 2**20
for n in range(32):
    fd = os.open(f"held{n}", os.O_CREAT | os.O_WRONLY, 0o600)
    os.unlink(f"held{n}")
    for m in range(16):
        os.write(fd, chunk)
        print(f"wrote {n * 16 + m + 1} MiB", flush=True)
    held.append(fd)
print("finished", flush=True)
EOF"""


def test_a_writer_of_deleted_files_is_stopped_near_the_cap_however_far_apart_the_measures(repo, monkeypatch):
    monkeypatch.setattr(disk, "MIN_INTERVAL", 60.0)
    with open_sandbox(repo, limits=Limits(disk="64m")) as box:
        if box._disk is None:
            pytest.skip("this engine has a disk quota: no measures to bound")
        if getattr(box._disk, "space", "no probe yet (0972c8d)") is None:
            pytest.skip("the probe needs this host's view of the engine (root, or rootless Docker)")
        result = box.run(WRITER, timeout=120)
        written = max([int(n) for n in re.findall(r"wrote (\d+) MiB", result.output)] or [0])
        assert "finished" not in result.output and "Disk cap reached" in result.output, result.output[-500:]
        # bench/disk_overshoot.py: 0-20 MiB past the cap under load; on an idle machine (2026-11-29) 112-143 MiB:
        # the page cache holds the writes longer and the free space the probe reads falls late (an open defect)
        assert written <= 64 + 192, written
        assert "deleted while still open" in result.output
        assert box.run("echo usable").output.strip() == "usable"  # init and the container's main process kept
        assert box.run("ls /proc/[0-9]*/fd -l 2>/dev/null | grep -c '(deleted)'").output.strip() == "0"
