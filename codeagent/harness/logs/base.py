"""What every log parser shares: line cleaning, the record callback, JSON documents inside a log.

The language parsers (log_parsers_<lang>.py) depend on this module only, so that parsers.py can
import them to fill its registry. Each language module exports `PARSERS` {name: parser} and
`MARKERS` {name: regex}: a marker found in a log (multi-line search) says the log is the output of
that parser's tool or of the build that runs before it (a compile error is such output), which is
how grading tells a run that failed from a log in some other format (see grading/verdict.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

Record = Callable[[str, str], None]  # record(test id, status); the last report of a test counts
Parser = Callable[[str, Record], None]

PASSED, FAILED, SKIPPED, ERROR = "PASSED", "FAILED", "SKIPPED", "ERROR"

# A C/C++ build that failed before its tests ran (make, ninja, cmake, a compiler's diagnostic).
NATIVE_BUILD = (r"^\S*make(?:\[\d+\])?: \*\*\*", r"^ninja: build stopped", r"^CMake Error",
                r"^\S+:\d+:\d+: (?:fatal )?error: ")

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean(line: str) -> str:
    """Drop colour codes and control characters (a pty makes test runners colour their output)."""
    return _CONTROL.sub("", _ANSI.sub("", line))


def clean_lines(log: str) -> Iterator[str]:
    """The log's lines, cleaned and stripped."""
    for raw in log.split("\n"):
        yield clean(raw).strip()


_CLOSING_LINE = re.compile(r"^\}[ \t\r]*$", re.MULTILINE)
_OPENING_LINE = re.compile(r"^\{[ \t\r]*$", re.MULTILINE)


def json_objects(log: str, *, required: str) -> Iterator[dict[str, Any]]:
    """The JSON objects in a log that have the key `required`, in order. A document starts at the
    first `{` of a line (after colour codes or a message the report was printed behind): either on
    one line (go test -json's events, jest's compact report) or pretty-printed, from a `{` ending its
    line to the next line `}` (mocha); the text around is skipped.

    Each part of the log is decoded at most once or twice, so a log of any content is read in
    linear time (a failed decode costs as much as the text it was given)."""
    decoder = json.JSONDecoder()
    position, closing = 0, -2  # closing: the end of the next `}` line; -1: there is none
    while True:
        start = log.find("{", position)
        if start < 0:
            return
        line_end = log.find("\n", start)
        line_end = len(log) if line_end < 0 else line_end
        position = line_end
        stop = line_end
        if not log[start + 1:line_end].strip():  # a pretty-printed document's first line
            if closing == -2 or 0 <= closing < line_end:
                found = _CLOSING_LINE.search(log, line_end)
                closing = found.end() if found else -1
            # a document's own lines are indented: only the last `{` line before a `}` line starts one
            if closing >= 0 and not _OPENING_LINE.search(log, line_end, closing):
                stop = closing
        try:
            value, _ = decoder.raw_decode(log[start:stop])
        except ValueError:
            continue
        if isinstance(value, dict) and required in value:
            position = stop
            yield value


def markers(*patterns: str) -> re.Pattern[str]:
    """One multi-line regex matching any of the patterns."""
    return re.compile("|".join(f"(?:{pattern})" for pattern in patterns), re.MULTILINE)
