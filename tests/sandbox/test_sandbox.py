"""The sandbox protocol, run against both backends (Docker: real engine; Local: real bash)."""

from __future__ import annotations

import subprocess
import time

import pytest

from codeagent.sandbox import open_sandbox
from tests.support.git import git

FILES = {
    "app.py": "def greet(name):\n    return 'hello ' + name\n",
    "data/logo.bin": bytes(range(256)) * 4,
    "old.txt": "to be deleted\n",
}


@pytest.fixture(params=["docker", "local"])
def box(request, make_repo, tmp_path, monkeypatch):
    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))
    if request.param == "docker":
        request.getfixturevalue("no_leaks")
    repo = make_repo(FILES)
    with open_sandbox(repo, kind=request.param, output_limit=64 * 1024) as sandbox:
        sandbox.repo = repo
        yield sandbox


def test_cwd_and_environment_persist(box):
    assert box.run("pwd").output.strip() == box.workdir
    assert box.run("mkdir -p sub && cd sub && export GREETING=hi && greet() { echo fn-$1; }").exit_code == 0
    result = box.run("echo $GREETING; pwd; greet x")
    assert result.output.splitlines() == ["hi", f"{box.workdir}/sub", "fn-x"]
    assert box.shell.cwd == f"{box.workdir}/sub"


def test_exit_code_stderr_and_odd_syntax(box):
    result = box.run("echo out; echo err >&2; exit_status() { return 3; }; exit_status")
    assert result.exit_code == 3 and result.output == "out\nerr\n"
    broken = box.run("echo 'unbalanced")
    assert broken.exit_code == 2 and "unexpected EOF" in broken.output
    assert box.run("cat <<'EOF'\nline $HOME\nEOF").output == "line $HOME\n"
    assert box.run("printf 'no newline'").output == "no newline"


def test_commands_do_not_read_the_control_stream(box):
    result = box.run("cat; read line; echo after:$line")  # stdin is /dev/null
    assert result.exit_code == 0 and result.output == "after:\n"
    assert box.run("echo still-alive").output == "still-alive\n"


def test_timeout_kills_the_process_tree_and_keeps_the_shell(box):
    import random

    box.run("export KEEP=1; cd data")
    first, second, third = random.sample(range(300000, 900000), 3)  # this run's own: nothing else sleeps so long
    result = box.run(f"sleep {first} & (sleep {second}; echo never) & python3 -c 'import time; time.sleep({third})'",
                     timeout=1)
    assert result.timed_out and not result.shell_restarted
    # (bash may first report its killed background jobs: only the last line is the count). The local
    # sandbox sees every process of the host: match this run's exact commands, not any `python3 -c`
    # (whose path may be absolute, as under pyenv), with durations drawn for the run (a CI run once
    # counted a `sleep 300` of the developer's shell; a suite run beside this one sleeps its own).
    count = (rf"ps -eo args | grep -E '^sleep ({first}|{second})$|python3 -c import time; time\.sleep\({third}\)$' "
             "| grep -vc grep")
    for _ in range(50):  # killed, but a loaded machine may take a moment to reap them
        survivors = box.run(count).output
        if survivors.strip().splitlines()[-1] == "0":
            break
        time.sleep(0.1)
    assert survivors.strip().splitlines()[-1] == "0"
    assert box.run("echo $KEEP; pwd").output.split() == ["1", f"{box.workdir}/data"]


def test_a_stuck_shell_is_replaced_with_cwd_and_environment(box):
    box.run("export KEEP=2; cd data")
    result = box.run("while true; do :; done", timeout=1)
    assert result.timed_out and result.shell_restarted and result.exit_code is None
    assert box.run("echo $KEEP; pwd").output.split() == ["2", f"{box.workdir}/data"]


@pytest.mark.parametrize("command,code", [("exit 7", 7), ("exec true", 0), ("kill -9 $$", None)])
def test_shell_death_is_reported_and_recovered(box, command, code):
    box.run("export KEEP=3; cd data")
    result = box.run(command, timeout=10)
    assert result.shell_restarted and not result.timed_out
    if code is not None:
        assert result.exit_code == code
    assert box.run("echo $KEEP; pwd").output.split() == ["3", f"{box.workdir}/data"]


def test_a_shell_restarted_after_the_environment_shrank_has_the_smaller_one(box):
    """The saved environment is written over in place: what a longer one left after it is not read back."""
    many = "$(printf 'V%04d ' $(seq 500))"  # exported with no value: their lines hold no quotes to split
    box.run(f"export {many} ZZ_GONE=1 KEEP=4")  # `export -p` sorts: ZZ_GONE's line is the last
    box.run(f"unset {many} ZZ_GONE; export NEW=5")
    assert box.run("exit 1").shell_restarted
    assert box.run('echo "${ZZ_GONE:-none} $KEEP $NEW"').output.split() == ["none", "4", "5"]


def test_huge_output_is_bounded_head_and_tail(box):
    result = box.run("seq 1 3000000; echo THE-END", timeout=120)  # ~21 MB through a 64 KiB window
    assert result.exit_code == 0
    assert result.total_bytes > 20_000_000
    assert result.elided_bytes == result.total_bytes - 64 * 1024
    assert result.output.startswith("1\n2\n3\n") and result.output.endswith("THE-END\n")
    assert "bytes of output elided" in result.output and len(result.output) < 70 * 1024


def test_binary_output_is_decoded_safely(box):
    result = box.run("head -c 4096 /dev/urandom; printf '\\377\\376 tail'")
    assert result.exit_code == 0 and result.output.endswith(" tail")


def test_files_round_trip_including_binary_and_large(box):
    assert box.read_file("data/logo.bin") == FILES["data/logo.bin"]
    big = bytes(range(256)) * (12 * 4096)  # 12 MiB
    box.write_file("new/dir/big.bin", big)
    assert box.read_file("new/dir/big.bin") == big
    assert box.run("wc -c < new/dir/big.bin").output.strip() == str(len(big))
    box.run("chmod 755 app.py")
    box.write_file("app.py", "print(1)\n")
    assert box.run("stat -c %a app.py").output.strip() == "755"  # an existing file keeps its mode
    with pytest.raises(FileNotFoundError):
        box.read_file("missing.txt")
    with pytest.raises(IsADirectoryError):
        box.read_file("data")
    names = {entry.path: entry.kind for entry in box.list_dir(".")}
    assert names["app.py"] == "file" and names["data"] == "dir" and names["new"] == "dir"
    with pytest.raises(NotADirectoryError):
        box.list_dir("app.py")


def test_diff_covers_new_deleted_and_binary_files_and_applies(box, tmp_path):
    box.write_file("app.py", "def greet(name):\n    return f'hello {name}!'\n")
    box.run("rm old.txt && printf '\\000\\001\\002' > data/new.bin && echo note > notes.md")
    box.run("mkdir -p scratch && echo tmp > scratch/repro.py")
    patch = box.diff(exclude=["scratch/*"])
    assert "deleted file mode" in patch and "new file mode" in patch and "GIT binary patch" in patch
    assert "scratch/repro.py" not in patch
    assert box.run("git status --porcelain").output.count("??") >= 2  # the agent's index is untouched
    # The patch reproduces the sandbox's tree on a fresh copy of the original repository.
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(box.repo), str(clone)], check=True)
    (tmp_path / "change.patch").write_text(patch)
    git(clone, "apply", "--binary", str(tmp_path / "change.patch"))
    assert (clone / "data" / "new.bin").read_bytes() == b"\x00\x01\x02"
    assert not (clone / "old.txt").exists()
    assert (clone / "app.py").read_text() == box.read_file("app.py").decode()


def test_an_edit_of_the_same_size_in_the_second_the_index_was_written_is_in_the_diff(box):
    # git compares stat times in whole seconds: such an edit looks clean unless the index copy the diff
    # uses keeps the index's own time (git then re-reads "racily clean" files). CI lost a subagent's edit so.
    same_second = box.run(
        "while [ \"$(date +%N | cut -c1)\" -gt 2 ]; do sleep 0.02; done; "
        "touch app.py && git update-index -q --refresh && "
        "printf 'def greet(name):\\n    return %s + name\\n' \"'HELLO '\" > app.py && "
        "[ \"$(stat -c %Y .git/index)\" = \"$(stat -c %Y app.py)\" ] && echo same-second")
    assert same_second.output.strip() == "same-second", same_second.output
    time.sleep(1.1)  # the diff's copy of the index is made in a later second
    assert "+    return 'HELLO ' + name" in box.diff()


def test_the_users_checkout_is_never_modified(box):
    (box.repo / "app.py").write_text("# local edit\n")
    before = git(box.repo, "status", "--porcelain")
    box.write_file("app.py", "changed in sandbox\n")
    box.run("git add -A && git -c user.email=a@b -c user.name=a commit -qm x && rm -rf data")
    assert (box.repo / "app.py").read_text() == "# local edit\n"
    assert git(box.repo, "status", "--porcelain") == before
    assert (box.repo / "data" / "logo.bin").exists()
    # the sandbox started from the commit, not from the dirty working tree
    assert box.run("git show codeagent-base:app.py").output == FILES["app.py"]
