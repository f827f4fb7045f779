"""The shell's output parsing over any split of the byte stream (no Docker: a scripted transport)."""

from __future__ import annotations

import random

import pytest

from codeagent.sandbox.output import BoundedOutput
from codeagent.sandbox.shell import ShellSession
from tests.support.transports import ScriptedTransport


def parse(output: bytes, sizes: list[int], limit: int = 1 << 20):
    session = ShellSession(lambda: None, state_dir="/tmp/s", workdir="/", kill_children=lambda pid: True,
                           hard_reset=lambda: None, output_limit=limit)
    session._transport = ScriptedTransport(output + session._marker + b" 7 /work/dir\n", sizes)  # type: ignore[assignment]
    captured = BoundedOutput(limit)
    return session._read_until_marker(captured, None), captured


@pytest.mark.parametrize("seed", range(40))
def test_the_marker_is_found_however_the_reads_are_cut(seed):
    rng = random.Random(seed)
    output = bytes(rng.choice(b"ab_\n") for _ in range(rng.randrange(0, 3000)))
    output += b"__CODEAGENT_" * rng.randrange(0, 3)  # a prefix of the marker, not the marker
    sizes = [rng.choice([1, 2, 5, 17, 30, 31, 32, 33, 100, 4096]) for _ in range(400)]
    status, captured = parse(output, sizes)
    assert status == (7, "/work/dir")
    assert captured.text() == output.decode() and captured.total == len(output)


def test_a_large_output_is_kept_whole_under_the_limit_and_cut_over_it():
    line = b"x" * 99 + b"\n"
    status, captured = parse(line * 10_000, [65536] * 100)  # 1 MB in 64 KiB reads
    assert status == (7, "/work/dir") and captured.text() == (line * 10_000).decode()
    status, captured = parse(line * 10_000, [65536] * 100, limit=10_000)
    text = captured.text()
    assert captured.total == 1_000_000 and "bytes of output elided" in text and len(text) < 10_100
    assert text.startswith("x" * 99 + "\n") and text.endswith("x" * 99 + "\n")
