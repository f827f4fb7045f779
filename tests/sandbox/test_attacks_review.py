"""Variants of issue 10's holes found in review, each with the model as the adversary."""

from __future__ import annotations

import os

import pytest

from codeagent.run.apply import apply_patch
from tests.support.checkout import diff_of
from tests.support.git import git


@pytest.mark.parametrize("links", [
    # d/up -> .. is the repository's top; d/out -> up/.. reads as "d" but is the top's parent
    [("d/up", ".."), ("d/out", "up/..")],
    # the same through a chain: each link looks inside on its own
    [("d/e/up", "../.."), ("d/e/f", "up/../x")],
])
def test_apply_refuses_a_symlink_chain_that_leaves_the_repo(checkout, links):
    def change(repo):
        for path, target in links:
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, repo / path)
    patch = diff_of(checkout, change)
    outcome = apply_patch(checkout, patch)
    assert not outcome.applied, outcome.message
    assert "outside the repository" in outcome.message
    assert not os.path.lexists(checkout / "d")


def test_apply_refuses_a_link_through_a_symlink_the_checkout_has(checkout, tmp_path):
    os.symlink("..", checkout / "top")  # committed by the user: the repository's parent
    git(checkout, "add", "top")
    git(checkout, "commit", "-qm", "top")
    patch = diff_of(checkout, lambda repo: os.symlink("../top/../etc", repo / "src" / "x"))
    # "../top/../etc" from src reads as etc, but top is a link: it is the parent's parent's etc
    outcome = apply_patch(checkout, patch)
    assert not outcome.applied, outcome.message


def test_apply_still_allows_links_inside(checkout):
    def change(repo):
        (repo / "d").mkdir()
        os.symlink("../src", repo / "d" / "src")
        os.symlink("src/app.py", repo / "d" / "app")
        os.symlink("../menu.txt", repo / "d" / "menu")
    outcome = apply_patch(checkout, diff_of(checkout, change))
    assert outcome.applied, outcome.message


def _new_files(*paths: str) -> str:
    return "".join(f"diff --git a/{p} b/{p}\nnew file mode 100644\n--- /dev/null\n+++ b/{p}\n@@ -0,0 +1 @@\n+x\n"
                   for p in paths)


@pytest.mark.parametrize("path", [
    # package metadata on the import path: pytest loads every `pytest11` entry point at start-up
    # (a repository installed with `setup.py develop` has its root on sys.path)
    "fake.dist-info/entry_points.txt", "fake-1.0.dist-info/METADATA", "src/fake.egg-info/entry_points.txt",
    # a module at the root (or beside a runner script) that shadows one the test runner imports
    "doctest.py", "unittest/__init__.py", "pytest.py", "_pytest/__init__.py", "pluggy.py", "bin/optparse.py",
    "platform.cpython-39-x86_64-linux-gnu.so",
])
def test_grading_flags_start_up_code_under_another_name(path):
    from codeagent.harness.grading.integrity import flag_patch, path_rule
    assert path_rule(path), path
    assert path in flag_patch(_new_files(path))
    assert path in flag_patch("", extra_paths=[path])  # made by the appliers, seen by git status


@pytest.mark.parametrize("path", ["django/utils/inspect.py", "sympy/core/numbers.py", "src/_pytest/python.py",
                                  "astropy/io/ascii/core.py", "docs/conf.py", "setup.py", "code/README"])
def test_grading_still_passes_ordinary_source(path):
    from codeagent.harness.grading.integrity import path_rule
    assert path_rule(path) is None


def test_a_background_writer_between_commands_is_held_to_the_disk_cap(make_repo, tmp_path, monkeypatch, no_leaks):
    """The cap was measured only while a command ran: `writer &` then quick commands wrote past it."""
    import time

    from codeagent.sandbox import Limits, open_sandbox
    from codeagent.sandbox.engine import docker_client

    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))
    repo = make_repo({"main.py": "print('hi')\n"})
    cap = 64 * 2**20
    with open_sandbox(repo, limits=Limits(disk="64m")) as box:
        started = box.run("(for i in $(seq 1 48); do head -c 8M /dev/zero > /tmp/f$i; sleep 0.05; done) "
                          ">/dev/null 2>&1 & echo started")
        assert "started" in started.output
        time.sleep(6)  # the model thinks; the job writes 384M unless stopped
        layer = docker_client().api.containers(all=True, size=True, filters={"id": box.container.id})[0]["SizeRw"]
        # past the cap by what this writer (~100 MB/s) writes in one interval (0.5 s) plus the
        # measure and the pause, which take their own time on a loaded machine (CI saw 64 MiB)
        assert layer <= cap + 128 * 2**20
        result = box.run("echo still usable")
        assert "Disk cap reached" in result.output and "still usable" in result.output
        # over the cap but no longer growing: a quiet background job is left alone
        box.run("sleep 300 >/dev/null 2>&1 &")
        time.sleep(2)
        assert "sleep 300" in box.run("ps -eo args").output
        freed = box.run("rm -f /tmp/f*; echo freed")
        assert "freed" in freed.output and "Back under the disk cap" in freed.output


def test_a_hung_command_cannot_outlast_max_seconds(make_repo, tmp_path, monkeypatch, no_leaks):
    """max_seconds was checked between steps only: one `sleep` of command_timeout ran past it (and a
    repository may raise command_timeout: it is bounded by max_seconds, which it may only lower)."""
    import json
    import time

    from codeagent.agent.loop import Agent
    from codeagent.config import Config
    from codeagent.events import EventBus
    from codeagent.models import ScriptedModel
    from codeagent.sandbox import open_sandbox
    from codeagent.task import Task
    from codeagent.trajectory.store import TrajectoryStore

    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))
    repo = make_repo({"main.py": "print('hi')\n"})
    turn = {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {
        "name": "bash", "arguments": json.dumps({"command": "sleep 120", "timeout": 120})}}]}
    model = ScriptedModel([turn, turn])
    agent = Agent(model, Config(agent={"localize": False}, limits={"max_seconds": 4, "command_timeout": 10**6}),
                  events=EventBus(lambda event: None), store=TrajectoryStore(tmp_path / "trajectories"))
    with open_sandbox(str(repo)) as sandbox:
        started = time.monotonic()
        result = agent.run(Task(repo=str(repo), problem_statement="wait"), sandbox)
        assert time.monotonic() - started < 30
    assert result.exit_status == "max_time", result.message


def test_a_huge_diff_is_never_read_out_of_the_sandbox(make_repo, tmp_path, monkeypatch, no_leaks):
    """max_patch_bytes was checked after the whole diff was read into this process, at every
    edit: a 150 MB file in the sandbox cost ~400 MB of the host's memory per step, up to the disk cap."""
    import json
    import resource

    from codeagent.agent.loop import Agent
    from codeagent.config import Config
    from codeagent.events import EventBus
    from codeagent.models import ScriptedModel
    from codeagent.sandbox import open_sandbox
    from codeagent.task import Task
    from codeagent.trajectory.store import TrajectoryStore

    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))
    repo = make_repo({"main.py": "print('hi')\n"})
    turns = [{"role": "assistant", "content": "", "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {
        "name": name, "arguments": json.dumps(arguments)}}]}
        for i, (name, arguments) in enumerate([("bash", {"command": "head -c 20M /dev/urandom > blob.bin"}),
                                               ("bash", {"command": "echo again >> main.py"}), ("submit", {})])]
    store = TrajectoryStore(tmp_path / "trajectories")
    agent = Agent(ScriptedModel(turns), Config(agent={"localize": False}), events=EventBus(lambda event: None),
                  store=store)
    with open_sandbox(str(repo)) as sandbox:
        reads = []
        read_file = sandbox.read_file
        monkeypatch.setattr(sandbox, "read_file", lambda path, max_bytes=None: reads.append(max_bytes)
                            or read_file(path, max_bytes=max_bytes))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result = agent.run(Task(repo=str(repo), problem_statement="x"), sandbox)
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    assert result.exit_status == "patch_too_large" and result.patch == "", result.message
    assert "over the cap of 5,000,000" in result.message
    assert None not in reads  # every diff read was capped
    assert grown < 40 * 2**20


def test_a_flood_of_test_output_is_not_read_whole_and_never_resolves(make_repo, tmp_path, monkeypatch, no_leaks):
    """The test log (written by the patch's code) was read whole into this process, up to the
    sandbox's disk cap. Over the cap the run counts as incomplete: a cut log could hide a FAILED line."""
    from codeagent.harness.grading import task_env as evaluate
    from codeagent.sandbox import open_sandbox

    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(evaluate, "MAX_LOG_BYTES", 2**20, raising=False)
    repo = make_repo({"main.py": "print('hi')\n"})
    with open_sandbox(str(repo)) as box:
        box.run(f"mkdir -p {evaluate.PATCH_DIR}")
        run = evaluate.run_tests(box, "echo 'FAILED test_a'; head -c 3M /dev/zero | tr '\\0' x; echo; "
                                      "echo 'PASSED test_a'", timeout=60)
        small = evaluate.run_tests(box, "echo 'PASSED test_a'", timeout=60)
    assert not run.complete and len(run.log) < 1000 and "not read" in run.log
    assert small.complete and "PASSED test_a" in small.log


@pytest.mark.parametrize("path", [".codeagent.yaml", "sub/.codeagent.yaml", ".CodeAgent.yaml"])
def test_apply_refuses_a_patch_that_writes_codeagents_own_settings(checkout, path):
    """In a trusted repository the file may set sandbox.kind: local or model.api_base: a model
    that writes it through --apply chooses its own sandbox (none) and endpoint for the next run."""
    def change(repo):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("sandbox: {kind: local}\nmodel: {api_base: 'http://evil.example/v1'}\n")
        (repo / "src" / "app.py").write_text("print('fixed')\n")
    outcome = apply_patch(checkout, diff_of(checkout, change))
    assert not outcome.applied and path in outcome.message and "settings" in outcome.message
    assert not (checkout / path).exists() and (checkout / "src" / "app.py").read_text() == "print('hi')\n"


def test_eval_error_lines_show_escape_sequences_not_obey_them(tmp_path, capsys):
    """An instance's error reason can quote the model's patch (git's words about its file names);
    the summary printed it through rich, which passes ESC and C1 controls to the terminal."""
    from codeagent.evals.report import finish as _finish

    reason = "patch failed: \x1b]0;pwned\x07\x1b[2J\x9b31m evil.py"
    with pytest.raises(SystemExit):
        _finish([{"instance_id": "repo__x-1", "outcome": "harness_error", "reason": reason}], tmp_path, {})
    err = capsys.readouterr().err
    assert "error: repo__x-1" in err
    assert "\x1b]" not in err and "\x1b[2J" not in err and "\x9b" not in err and "^[]0;pwned" in err


def test_navigation_mirrors_a_bounded_number_of_changed_files(make_repo, tmp_path, monkeypatch, no_leaks):
    """Each sync fetched every changed file, one engine round trip (~0.1 s) each, onto this
    machine: 2,000 generated files made one navigate call take 213 s and 196 MB of host disk;
    100,000 would take hours, past max_seconds, and up to the disk cap of host disk."""
    from codeagent.sandbox import open_sandbox
    from codeagent.tools.base import ToolContext
    from codeagent.tools.mirror import MAX_SYNCED_BYTES, MAX_SYNCED_FILES, WorkspaceMirror

    assert MAX_SYNCED_FILES <= 500 and MAX_SYNCED_BYTES <= 64 * 2**20
    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))
    repo = make_repo({"main.py": "def base():\n    pass\n"})
    with open_sandbox(str(repo)) as box:
        mirror = WorkspaceMirror(ToolContext(sandbox=box), max_files=5)
        try:
            box.run("printf 'def changed():\\n    pass\\n' > main.py; mkdir gen; "
                    "for i in $(seq 10 39); do echo 'x = 1' > gen/f$i.py; done")
            reads = []
            read_file = box.read_file
            monkeypatch.setattr(box, "read_file", lambda path, max_bytes=None: reads.append(path)
                                or read_file(path, max_bytes=max_bytes))
            mirror.sync()
            assert len(reads) == 5
            mirrored = sorted(p.name for p in (mirror.root / "gen").iterdir()) if (mirror.root / "gen").exists() else []
            assert len(mirrored) == 4 and len(mirror.too_large) == 26
            assert "changed()" in (mirror.root / "main.py").read_text()  # tracked changes come first in git status
            assert all("not mirrored" in reason for reason in mirror.too_large.values())
        finally:
            mirror.close()


def test_serve_hangs_up_on_a_request_that_trickles_in():
    """IDLE_SECONDS bounded each wait only: a header byte every few seconds held a connection
    slot for ever, and MAX_CONNECTIONS such clients (slowloris) kept every other client out."""
    import socket
    import time

    from codeagent.serve.server import Server

    with Server(object(), port=0, idle_seconds=30, request_seconds=1.5) as server:
        host, port = server.server_address[:2]
        with socket.create_connection((host, port), timeout=10) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
            started = time.monotonic()
            closed = False
            while time.monotonic() - started < 8:
                try:
                    sock.sendall(b"X")
                    sock.settimeout(0.3)
                    if sock.recv(1) == b"":
                        closed = True
                        break
                except TimeoutError:
                    continue
                except OSError:
                    closed = True
                    break
            assert closed and time.monotonic() - started < 7  # 1.5 s limit, room for load (idle: 30 s)
