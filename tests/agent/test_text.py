"""The one head-and-tail truncation (codeagent/text.py) and its two uses."""

from __future__ import annotations

from codeagent.agent.history import head_tail
from codeagent.text import head_tail as cut
from codeagent.tools.text import truncate_middle


def test_head_and_tail_with_what_was_cut_between():
    text = "a" * 60 + "b" * 60
    assert cut(text, 20) == "a" * 10 + "\n[... 100 characters elided ...]\n" + "b" * 10
    assert cut(text, 21).endswith("\n" + "b" * 11)
    assert head_tail(text, 20) == "a" * 10 + "\n[... 100 chars elided to fit the context window ...]\n" + "b" * 10


def test_an_observation_cap_never_makes_the_text_longer():
    text = "x" * 101
    assert truncate_middle(text, 100) == text  # was 135 characters: the note outweighed the cut
    assert truncate_middle(text, 0) == text  # no cap


def test_a_cut_falls_between_lines_and_says_how_many_were_left_out():
    text = "".join(f"line {number:03d} of the output\n" for number in range(100))
    shortened = truncate_middle(text, 300)
    kept = [line for line in shortened.splitlines() if line.startswith("line ")]
    assert all(line.endswith(" of the output") for line in kept) and len(kept) >= 8
    left_out = 100 - len(kept)
    assert f"[... {left_out} lines ({left_out * 23} characters) elided ...]" in shortened
    assert len(shortened) <= 300 + len("[... 100 lines (9999 characters) elided ...]") + 2
    assert cut("one very long line without any break " * 20, 40).count("\n") == 2  # a single line: cut inside


def test_bounded_command_output_is_cut_between_lines():
    from codeagent.sandbox.output import BoundedOutput

    output = BoundedOutput(1000)
    lines = [f"{number:05d} some output of a command\n".encode() for number in range(500)]
    for line in lines:
        output.add(line)
    text = output.text()
    head, _, tail = text.partition("\n[... ")
    tail = tail.split("elided ...]\n", 1)[1]
    assert all(len(line) == 30 for line in head.splitlines() + tail.splitlines())  # whole lines only
    assert text.endswith("00499 some output of a command\n") and text.startswith("00000 some")
    left_out = sum(map(len, lines)) - len(head) - len(tail)
    assert f"[... {left_out} bytes of output elided ...]" in text
