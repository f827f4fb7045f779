"""What only the Docker backend promises: isolation, limits, cleanup, errors, parallel starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from codeagent.sandbox import ImageMissing, Limits, WorkspaceError, open_sandbox, snapshot
from codeagent.sandbox.docker import DockerSandbox
from tests.support.docker import sandbox_containers
from tests.support.git import git

pytestmark = pytest.mark.usefixtures("no_leaks")


def test_no_network_and_no_host_secrets_by_default(repo, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    with open_sandbox(repo) as box:
        assert box.run("ls /sys/class/net").output.split() == ["lo"]
        probe = box.run("python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 3)\"", timeout=20)
        assert probe.exit_code != 0 and "unreachable" in probe.output.lower()
        assert "sk-should-not-leak" not in box.run("env").output
    with open_sandbox(repo, limits=Limits(network=True)) as box:
        assert "eth0" in box.run("ls /sys/class/net").output.split()


def test_fork_bomb_is_contained_and_the_sandbox_recovers(repo):
    with open_sandbox(repo, limits=Limits(pids=128)) as box:
        box.run(":(){ :|:& };:", timeout=5)
        time.sleep(2)
        assert len(box.container.top()["Processes"]) <= 128  # the pids limit holds
        for _attempt in range(3):  # a command starved of pids times out, which resets the sandbox
            result = box.run("ls /proc | grep -c '^[0-9]'", timeout=5)
            count = result.output.strip().splitlines()[-1:]  # bash may first say `fork: retry` while bombs die
            if result.exit_code == 0 and count and count[0].isdigit() and int(count[0]) < 20:
                break
        else:
            pytest.fail(f"the sandbox did not recover from the fork bomb: {result}")
        assert box.run("echo alive").output == "alive\n"


def test_memory_hog_is_killed(repo):
    with open_sandbox(repo, limits=Limits(memory="256m")) as box:
        result = box.run("python3 -c \"x = bytearray(2 * 1024**3); print('alloc' + 'ated')\"", timeout=60)
        assert result.exit_code == 137 and "allocated" not in result.output  # SIGKILL by the OOM killer
        assert box.run("echo alive").output == "alive\n"


def test_container_removed_on_exception(repo):
    with pytest.raises(RuntimeError):
        with open_sandbox(repo) as box:
            container_id = box.container.id
            raise RuntimeError("boom")
    assert container_id not in sandbox_containers()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_container_removed_on_ctrl_c_and_sigterm(repo, tmp_path, sig):
    script = textwrap.dedent(f"""
        import sys, time
        from codeagent.cli import _terminate
        import signal
        signal.signal(signal.SIGTERM, _terminate)
        from codeagent.sandbox import open_sandbox
        with open_sandbox({str(repo)!r}) as box:
            print(box.container.id, box._io_root, flush=True)
            box.run("sleep 600")
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "CODEAGENT_CACHE": os.environ["CODEAGENT_CACHE"]})
    container_id, io_dir = proc.stdout.readline().split()
    assert container_id in sandbox_containers() and os.path.isdir(io_dir)
    time.sleep(0.5)
    proc.send_signal(sig)
    proc.wait(timeout=30)
    assert container_id not in sandbox_containers() and not os.path.exists(io_dir)


def test_clear_errors_and_no_leaks(tmp_path, make_repo):
    with pytest.raises(WorkspaceError, match="does not exist"):
        open_sandbox(tmp_path / "nope")
    (tmp_path / "plain").mkdir()
    with pytest.raises(WorkspaceError, match="not a git repository"):
        open_sandbox(tmp_path / "plain")
    repo = make_repo({"a": "1"})
    with pytest.raises(WorkspaceError, match="deadbeef is not in"):
        open_sandbox(repo, "deadbeef")
    with pytest.raises(ImageMissing, match="codeagent sandbox build"):
        open_sandbox(repo, image="codeagent/base:does-not-exist")


def test_no_engine_gives_one_clear_message(repo):
    env = {**os.environ, "DOCKER_HOST": "unix:///tmp/no-such-docker.sock"}
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "sandbox", "run", "--repo", str(repo), "--", "true"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 3
    assert "No Docker engine answers at unix:///tmp/no-such-docker.sock" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_commit_selection_and_url_sources(make_repo):
    repo = make_repo({"v.txt": "one\n"})
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "v.txt").write_text("two\n")
    git(repo, "commit", "-qam", "second")
    with open_sandbox(f"file://{repo}", first) as box:
        assert box.read_file("v.txt") == b"one\n"
        assert box.run("git log --oneline | wc -l").output.strip() == "1"  # no history leaks in
    with open_sandbox(repo) as box:
        assert box.read_file("v.txt") == b"two\n"


def test_parallel_sandboxes_share_one_workspace_image(repo):
    snap = snapshot(repo)
    with ThreadPoolExecutor(4) as pool:
        boxes = list(pool.map(lambda _: DockerSandbox(snap), range(4)))
    try:
        assert len({box.image for box in boxes}) == 1
        for index, box in enumerate(boxes):
            box.write_file("main.py", f"print({index})\n")
        for index, box in enumerate(boxes):
            assert box.run("python3 main.py").output == f"{index}\n"
            assert f"+print({index})" in box.diff()
    finally:
        for box in boxes:
            box.close()


def test_a_workspace_image_pruned_behind_our_back_is_prepared_again(repo):
    from codeagent.sandbox.engine import docker_client

    snap = snapshot(repo)
    with DockerSandbox(snap) as first:
        image = first.image
    docker_client().images.remove(image, force=True)
    with DockerSandbox(snap) as second:
        assert second.run("cat main.py").output == "print('hi')\n"


def test_prune_judges_only_owners_of_its_own_host(base_image):
    """A Docker engine shared by hosts: on main a sandbox whose owner runs on another host was judged dead
    (its pid is not one here) and removed. Now it stays, with a note; one of an earlier boot of this
    machine is dead whatever its pid."""
    import socket
    from pathlib import Path

    from codeagent.sandbox.docker import LABEL, owner_labels
    from codeagent.sandbox.engine import docker_client

    here = socket.gethostname()
    machine = f"{here}/{Path('/etc/machine-id').read_text().strip() if Path('/etc/machine-id').exists() else ''}"
    identity = f"{machine}/{Path('/proc/sys/kernel/random/boot_id').read_text().strip()}"
    host = "codeagent.host"
    labels = {  # name -> (labels, kept?)
        "other-host": ({"codeagent.owner": "node-b:999999999", host: "node-b/b0b/1234"}, True),
        "other-host-old-label": ({"codeagent.owner": "node-b:999999999"}, True),
        "earlier-boot": ({"codeagent.owner": f"{here}:{os.getpid()}", host: f"{machine}/an-earlier-boot"}, False),
        "dead-here": ({"codeagent.owner": f"{here}:999999999", host: identity}, False),
        "alive-here": ({"codeagent.owner": f"{here}:{os.getpid()}", host: identity}, True),
    }
    client = docker_client()
    made = {name: client.containers.create(base_image, ["true"], name=f"codeagent-prune-test-{name}-{os.getpid()}",
                                           labels={LABEL: "1", **extra}) for name, (extra, _) in labels.items()}
    try:
        proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "sandbox", "prune"], capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        left = {container.id for container in client.containers.list(all=True, filters={"label": LABEL})}
        assert {name for name, container in made.items() if container.id in left} == {
            name for name, (_, kept) in labels.items() if kept}
        assert "note: left" in proc.stderr and "of other hosts sharing this Docker engine" in proc.stderr
        assert owner_labels()[host] == identity  # what this host's sandboxes carry
    finally:
        for container in made.values():
            try:
                container.remove(force=True)
            except Exception:
                pass


def test_prune_removes_the_service_network_of_a_dead_owner():
    import socket

    from codeagent.sandbox.docker import LABEL
    from codeagent.sandbox.engine import docker_client
    from codeagent.sandbox.prune import prune

    client = docker_client()
    dead = client.networks.create("codeagent-svc-test-dead", internal=True,
                                  labels={LABEL: "service", "codeagent.owner": f"{socket.gethostname()}:999999999"})
    live = client.networks.create("codeagent-svc-test-live", internal=True,
                                  labels={LABEL: "service", "codeagent.owner": f"{socket.gethostname()}:{os.getpid()}"})
    try:
        prune()
        names = {network.name for network in client.networks.list(filters={"label": LABEL})}
        assert "codeagent-svc-test-dead" not in names and "codeagent-svc-test-live" in names
    finally:
        for network in (dead, live):
            try:
                network.remove()
            except Exception:
                pass


def test_a_repository_with_a_symlink_out_of_it_opens_and_the_link_stays_a_link(make_repo, tmp_path, monkeypatch):
    """The engine refused the copy ("invalid symlink") when a committed link pointed above the
    repository: such a repository could not be opened at all."""
    import os
    import subprocess

    from codeagent.sandbox import open_sandbox

    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))
    repo = make_repo({"main.py": "print('hi')\n"})
    os.symlink("../secret.txt", repo / "escape")
    os.symlink("/etc/shadow", repo / "absolute")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "links"], check=True)
    with open_sandbox(repo) as box:
        out = box.run("readlink escape absolute; git status --porcelain; cat main.py").output
        assert out.split() == ["../secret.txt", "/etc/shadow", "print('hi')"]


def test_small_files_go_in_through_the_shell_and_large_ones_through_the_engine(repo):
    """A patch or an edit is written by the sandbox's shell (a round trip, not the engine's archive upload);
    a file over the shell's share still goes through the engine; both arrive byte for byte."""
    with open_sandbox(repo) as box:
        uploads = []
        engine_upload = box.container.put_archive
        box.container.put_archive = lambda path, data: uploads.append(path) or engine_upload(path, data)
        small = bytes(range(256)) * 40 + b"\n__CODEAGENT_UPLOAD__\n$(touch /tmp/pwned)\n"
        box.write_file("patches/model.patch", small)
        assert box.read_file("patches/model.patch") == small and uploads == []
        assert box.run("test -e /tmp/pwned; echo $?").output.strip() == "1"
        box.write_file("empty.txt", b"")
        assert box.read_file("empty.txt") == b"" and uploads == []
        big = os.urandom(64 << 10)
        box.write_file("big.bin", big, mode=0o600)
        assert box.read_file("big.bin") == big and len(uploads) == 1
        assert box.run("stat -c %a big.bin; ls -A /tmp/.codeagent | grep -c upload-").output.split() == ["600", "0"]
