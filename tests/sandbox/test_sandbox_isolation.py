"""The model is the adversary: nothing it runs in the sandbox may reach the host, fill its disk,
or cost the run its patch (issue 10, items 2, 7 and 8)."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from codeagent.agent.loop import Agent
from codeagent.config import Config
from codeagent.events import EventBus
from codeagent.models import ScriptedModel
from codeagent.sandbox import Limits, SandboxError, open_sandbox
from codeagent.sandbox import prune as prune_module
from codeagent.sandbox.docker import CAPABILITIES, MOUNT_POINT
from codeagent.sandbox.engine import docker_client
from codeagent.sandbox.iodir import io_root
from codeagent.task import Task
from codeagent.trajectory.store import TrajectoryStore
from tests.support.docker import sandbox_containers
from tests.support.scripted import call

pytestmark = pytest.mark.usefixtures("no_leaks")

ATTACK = (
    f"cd {MOUNT_POINT}; cp /bin/bash x; chmod 4755 x; touch t; mkdir d; mknod p p; ln -s / s; "
    "ln out-1 hard; mv in-1 moved; chmod 777 out-1; cd /testbed"
)


def _host_entries(io_dir: Path) -> dict[str, int]:
    return {entry.name: entry.lstat().st_mode for entry in io_dir.iterdir()}


def test_the_sandbox_can_create_nothing_on_the_host(repo):
    with open_sandbox(repo) as box:
        assert box.io_mode == "fifo"
        io_dir = Path(box._io_root)
        assert io_dir.parent == io_root() and stat.S_IMODE(io_dir.stat().st_mode) == 0o700
        assert stat.S_IMODE(io_root().stat().st_mode) == 0o700 and io_root().stat().st_uid == os.getuid()
        result = box.run(ATTACK)
        assert "Read-only file system" in result.output
        entries = _host_entries(io_dir)
        assert all(stat.S_ISFIFO(mode) and stat.S_IMODE(mode) == 0o600 for mode in entries.values()), entries
        assert set(entries) <= {"in-1", "out-1"}
        assert box.run("echo still works").output == "still works\n"  # writing the FIFOs still works
    assert not io_dir.exists()


def test_the_io_dir_of_a_killed_process_is_removed_by_prune(repo, tmp_path, monkeypatch):
    script = textwrap.dedent(f"""
        import time
        from codeagent.sandbox import open_sandbox
        box = open_sandbox({str(repo)!r})
        print(box._io_root, box.container.id, flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "CODEAGENT_CACHE": str(tmp_path / "cache")})
    try:
        io_dir, container_id = proc.stdout.readline().split()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert Path(io_dir).exists() and container_id in sandbox_containers()  # kill -9 cleans nothing
    # only the process killed here counts as dead: leftovers of other users of this engine stay
    monkeypatch.setattr(prune_module, "owner_alive", lambda owner: owner != f"{socket.gethostname()}:{proc.pid}")
    prune_module.prune()
    assert not Path(io_dir).exists() and container_id not in sandbox_containers()


def test_capabilities_are_only_those_tasks_need(repo):
    numbers = {"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "FSETID": 4, "KILL": 5, "SETGID": 6, "SETUID": 7,
               "NET_BIND_SERVICE": 10}
    with open_sandbox(repo) as box:
        effective = box.run("grep CapEff /proc/self/status").output.split()[1]
        assert int(effective, 16) == sum(1 << numbers[name] for name in CAPABILITIES)
        assert box.run("mknod /tmp/mem c 1 1").exit_code != 0  # no device nodes
        # what installs and harness scripts do still works: chown, dropping to another user
        done = box.run("touch f && chown nobody:nogroup f && su -s /bin/sh nobody -c 'id -un' && rm f")
        assert done.exit_code == 0 and "nobody" in done.output
        assert "no_new_privs:\t1" in box.run("grep NoNewPrivs /proc/self/status").output.replace("NoNewPrivs", "no_new_privs")


def _layer_size(container_id: str) -> int:
    return docker_client().api.containers(all=True, size=True, filters={"id": container_id})[0]["SizeRw"]


def test_the_disk_cap_stops_writers_with_a_clear_message_and_the_sandbox_stays_usable(repo):
    cap = 64 * 2**20
    with open_sandbox(repo, limits=Limits(disk="64m")) as box:
        box.run("echo changed > main.py")
        result = box.run("head -c 300M /dev/zero > big; echo wrote", timeout=60)
        assert "Disk cap reached" in result.output and "cap is 64.0 MiB" in result.output
        assert _layer_size(box.container.id) <= cap + 2**20
        blocked = box.run("head -c 1M /dev/zero > more; echo rc=$?")
        assert "File too large" in blocked.output and "rc=1" in blocked.output
        assert "Still over the disk cap" in blocked.output
        freed = box.run("rm -f big more")
        assert "Back under the disk cap" in freed.output
        assert box.run("head -c 1M /dev/zero > ok && wc -c < ok").output.startswith("1048576")
        assert "+changed" in box.diff()
        # many files, each under the cap, written by a long command: the watcher stops it
        looped = box.run("for i in $(seq 1 60); do head -c 4M /dev/zero > f$i; sleep 0.1; done; echo finished",
                         timeout=120)
        assert "Disk cap reached" in looped.output and "finished" not in looped.output
        assert _layer_size(box.container.id) <= cap + 48 * 2**20  # one interval of this slow writer


def _held_deleted(box) -> str:
    """What `ls -l` shows of the sandbox's descriptors on deleted files."""
    return box.run("ls -l /proc/[0-9]*/fd 2>/dev/null | grep -c '(deleted)'").output.strip()


def _run_until(box, command: str, needle: str) -> str:
    """The command's output, then that of short commands until `needle` shows: the layer is
    measured once the commands' time adds up to an interval, which grows with the measure's cost."""
    output = box.run(command, timeout=60).output
    for _ in range(30):
        if needle in output:
            break
        time.sleep(0.25)
        output += box.run("sleep 0.25").output
    return output


@pytest.mark.parametrize("view", ["host", "helper"])
def test_the_disk_cap_counts_files_deleted_while_held_open(repo, view, monkeypatch):
    """Issue 21, item 2: the layer's size misses them (SizeRw said 932 B while 720 MiB were held).
    Counted from the host's /proc (as root here) or, for a user who may not read root's processes
    or a remote engine, by a helper container in the host's pid namespace."""
    if view == "helper":
        from codeagent.sandbox.held import HostView

        monkeypatch.setattr(HostView, "open", classmethod(lambda cls, container_id: None))
    with open_sandbox(repo, limits=Limits(disk="64m")) as box:
        box.run("echo changed > main.py")
        # each file is held by a background job (it inherits descriptor 3), then deleted at once
        hold = "head -c 25M /dev/zero > {0}; exec 3< {0}; sleep 300 <&3 & exec 3<&-; rm {0}; "
        result = _run_until(box, "".join(hold.format(f"d{i}") for i in range(3)) + "sleep 1", "Disk cap reached")
        assert _layer_size(box.container.id) <= 26 * 2**20  # the engine sees one file at most (stopped before its rm)
        assert "Disk cap reached" in result and "deleted while still open" in result
        assert _held_deleted(box) == "0"  # the holders were stopped: the blocks are free again
        # background holders made while no command runs are stopped too
        box.run("( sleep 1; " + "".join(hold.format(f"e{i}") for i in range(3)) + ") > /dev/null 2>&1 &")
        for _ in range(40):
            if box._disk.idle_tripped:
                break
            time.sleep(0.25)
        later = box.run("echo next")
        assert "Disk cap reached" in later.output and _held_deleted(box) == "0"
        # the engine's files mounted into the container are the container's too
        written = _run_until(box, "head -c 40M /dev/zero > /etc/hosts; head -c 40M /dev/zero > /etc/hostname",
                             "Disk cap reached")
        assert "Disk cap reached" in written
        assert int(box.run("cat /etc/hosts /etc/hostname | wc -c").output) < 2**20  # the engine wrote them anew
        assert "+changed" in box.diff()
        # the helper is out of the sandbox's sight: it cannot be signalled or read from inside
        assert box.run("ps -eo args").output.count("docker-init -- sleep infinity") == 1  # the sandbox's own
        assert type(box._disk.view).__name__ == {"host": "HostView", "helper": "HelperView"}[view]


def test_shared_memory_is_capped(repo):
    with open_sandbox(repo) as box:
        host_config = docker_client().api.inspect_container(box.container.id)["HostConfig"]
        assert host_config["ShmSize"] == 64 * 2**20
        assert "No space left" in box.run("head -c 70M /dev/zero > /dev/shm/big").output


@pytest.mark.parametrize("attack", [
    ":(){ :|:& };:",  # a fork bomb whose bombs outlive the command
    f"touch {MOUNT_POINT}/in-2 {MOUNT_POINT}/out-2; exit",  # plant the next shell's FIFOs, then restart
])
def test_an_attack_on_the_sandbox_does_not_cost_the_patch(repo, tmp_path, attack):
    turns = [call("bash", command="echo changed > main.py"), call("bash", command=attack),
             call("bash", command="sleep 3; echo next"), call("bash", command="echo after"), call("submit")]
    events = []
    agent = Agent(ScriptedModel(turns), Config(agent={"localize": False}, sandbox={"pids": 256}),
                  events=EventBus(events.append),
                  store=TrajectoryStore(tmp_path / "trajectories"))
    with open_sandbox(repo, limits=Limits(pids=256)) as sandbox:
        result = agent.run(Task(repo=str(repo), problem_statement="x"), sandbox)
    assert result.exit_status == "submitted", result.message
    assert "+changed" in result.patch
    observations = [event.output for event in events if event.kind == "observation"]
    assert observations[-2].startswith("after")
    if attack.startswith(":"):
        assert any("near the sandbox's limit of 256" in text for text in observations)


def test_the_io_root_must_be_the_users_own_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / f"codeagent-{os.getuid()}").symlink_to(elsewhere)  # planted by someone else
    with pytest.raises(SandboxError, match="not a directory owned by you"):
        io_root()
    (tmp_path / f"codeagent-{os.getuid()}").unlink()
    (tmp_path / f"codeagent-{os.getuid()}").mkdir(mode=0o755)
    assert stat.S_IMODE(io_root().stat().st_mode) == 0o700
