"""The output path's checks (issue 27): a command's output (up to megabytes) is searched for the signs of a
runaway only when the sandbox holds enough processes for one; the count (its cgroup's pids.current: processes
and threads) is read on this host in microseconds, not from the output or the engine."""

from __future__ import annotations

from codeagent.sandbox.docker_recovery import FORK_FAILED, DockerRecovery
from codeagent.sandbox.held import HostView
from codeagent.sandbox.protocol import Limits
from codeagent.sandbox.shell import CommandResult


class Watched(str):
    """Output that records whether anything looked for text in it."""

    searched = False

    def __contains__(self, item):
        Watched.searched = True
        return super().__contains__(item)


class Watch:
    def __init__(self, view):
        self.view = view


class Box(DockerRecovery):
    def __init__(self, procs_file, engine_count=0, pids=100):
        self.limits = Limits(pids=pids)
        self._disk = Watch(HostView(procs_file, []))  # type: ignore[assignment]
        self.engine_count = engine_count

    def _processes(self) -> int:
        return self.engine_count


def _result(text: str, timed_out: bool = False) -> CommandResult:
    Watched.searched = False
    return CommandResult(output=Watched(text), exit_code=0, timed_out=timed_out, seconds=0.0)


def _procs(tmp_path, count: int):
    (tmp_path / "pids.current").write_text(f"{count}\n")
    return tmp_path / "cgroup.procs"


def test_few_processes_mean_the_output_is_not_searched(tmp_path):
    box = Box(_procs(tmp_path, 3))
    assert box._tasks_from_host() == 3
    assert box._recover_from_runaways(_result("x" * 100_000 + FORK_FAILED)) == []
    assert not Watched.searched


def test_many_processes_mean_the_output_is_searched_as_before(tmp_path):
    box = Box(_procs(tmp_path, 60), engine_count=10)  # the engine's count decides, as before
    assert box._recover_from_runaways(_result("bash: fork: retry: " + FORK_FAILED)) == []
    assert Watched.searched


def test_a_timed_out_command_is_checked_whatever_the_count(tmp_path):
    box = Box(_procs(tmp_path, 1))
    assert box._recover_from_runaways(_result("still running", timed_out=True)) == []
    assert Watched.searched


def test_without_the_hosts_view_the_output_is_searched(tmp_path):
    box = Box(_procs(tmp_path, 1))
    box._disk = None
    assert box._tasks_from_host() is None
    box._recover_from_runaways(_result("output"))
    assert Watched.searched


def test_an_unreadable_count_means_the_output_is_searched(tmp_path):
    box = Box(tmp_path / "gone" / "cgroup.procs")  # the cgroup went away (the container is stopping)
    assert box._tasks_from_host() is None
    box._recover_from_runaways(_result("output"))
    assert Watched.searched


def test_the_count_follows_the_cgroup_file(tmp_path):
    box = Box(_procs(tmp_path, 3))
    assert box._tasks_from_host() == 3
    (tmp_path / "pids.current").write_text("700\n")  # read again each time, from its start
    assert box._tasks_from_host() == 700
