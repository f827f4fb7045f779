"""The phrases the Docker sandbox watches for in command output (the disk cap's 'File size limit exceeded', the
engine quota's 'No space left on device') are looked for in each read as it comes (issue 27): found however the
reads are cut, in an elided middle too, never in the marker line (its working directory)."""

from __future__ import annotations

import random

import pytest

from codeagent.sandbox.output import BoundedOutput, PhraseWatch
from codeagent.sandbox.shell import ShellSession
from tests.support.transports import ScriptedTransport

PHRASE = "File size limit exceeded"


def watched(output: bytes, sizes: list[int], cwd: bytes = b"/work/dir", limit: int = 1 << 20):
    session = ShellSession(lambda: None, state_dir="/tmp/s", workdir="/", kill_children=lambda pid: True,
                           hard_reset=lambda: None, output_limit=limit)
    session.watch = (PHRASE, "other phrase")
    session._transport = ScriptedTransport(output + session._marker + b" 0 " + cwd + b"\n", sizes)  # type: ignore[assignment]
    phrases = PhraseWatch(session.watch)
    captured = BoundedOutput(limit)
    status = session._read_until_marker(captured, None, phrases)
    return status, captured, phrases.seen


@pytest.mark.parametrize("seed", range(30))
def test_a_phrase_is_found_however_the_reads_are_cut(seed):
    rng = random.Random(seed)
    before = bytes(rng.choice(b"ab _\n") for _ in range(rng.randrange(0, 2000)))
    after = bytes(rng.choice(b"ab _\n") for _ in range(rng.randrange(0, 2000)))
    sizes = [rng.choice([1, 2, 5, 17, 23, 24, 25, 31, 32, 33, 100, 4096]) for _ in range(600)]
    status, captured, seen = watched(before + b"bash: line 1: 42 " + PHRASE.encode() + b" dd\n" + after, sizes)
    assert status == (0, "/work/dir")
    assert seen == {PHRASE}
    assert PHRASE in captured.text()


@pytest.mark.parametrize("seed", range(10))
def test_nothing_is_seen_in_output_without_the_phrase_nor_in_the_marker_line(seed):
    rng = random.Random(seed)
    near = PHRASE.encode()[:-1] + b"\n" + PHRASE.encode()[1:]  # all but whole
    sizes = [rng.choice([1, 3, 24, 25, 64]) for _ in range(600)]
    status, _, seen = watched(near, sizes, cwd=b"/work/" + PHRASE.encode())
    assert status == (0, "/work/" + PHRASE) and seen == set()


def test_a_phrase_in_the_elided_middle_is_seen():
    middle = b"x" * 50_000 + PHRASE.encode() + b"x" * 50_000
    status, captured, seen = watched(middle, [65536] * 10, limit=1000)
    assert captured.elided and PHRASE not in captured.text()
    assert seen == {PHRASE}


def test_a_watch_with_no_phrases_sees_nothing():
    watch = PhraseWatch(())
    watch.feed(PHRASE.encode())
    assert watch.seen == set()


@pytest.mark.usefixtures("no_leaks")
def test_the_disk_caps_note_comes_from_the_shells_message_when_the_exit_code_hides_it(repo):
    from codeagent.sandbox import Limits, open_sandbox

    with open_sandbox(repo, limits=Limits(disk="64m")) as box:
        # a sparse file past the file size limit: the shell reports the kill, the command goes on and exits 0
        result = box.run("truncate -s 100m sparse; echo went on")
        assert result.exit_code == 0 and "went on" in result.output
        assert PHRASE in result.seen
        assert "A file reached the size limit of 64.0 MiB" in result.output
        quiet = box.run(f"printf '%1048576s' x; echo '{PHRASE[:-1]}'")  # a megabyte, and no phrase whole
        assert quiet.seen == frozenset() and "[sandbox]" not in quiet.output


def test_small_reads_are_looked_at_in_blocks(monkeypatch):
    """A short span is searched by CPython's simple loop (slow on runs of spaces): reads are gathered first."""
    from codeagent.sandbox import output

    watch = PhraseWatch((PHRASE,))
    looks = []
    real = PhraseWatch._look
    monkeypatch.setattr(PhraseWatch, "_look", lambda self: (looks.append(self._size), real(self)))
    for _ in range(256):
        watch.feed(b" " * 1024)
    watch.feed(b" " * 100 + PHRASE.encode()[:5])
    watch.feed(PHRASE.encode()[5:] + b"\n")
    assert watch.seen == {PHRASE}
    assert len(looks) == 256 * 1024 // output.WATCH_BLOCK + 1 and min(looks) > 0
