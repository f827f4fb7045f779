"""What every log parser shares: line cleaning, the record callback, JSON documents inside a log.

The language parsers (log_parsers_<lang>.py) depend on this module only, so that log_parsers.py can
import them to fill its registry. Each language module exports `PARSERS` {name: parser} and
`MARKERS` {name: regex}: a marker found in a log (multi-line search) says the log is the output of
that parser's tool or of the build that runs before it (a compile error is such output), which is
how grading tells a run that failed from a log in some other format (see grading.py).
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


def json_objects(log: str, *, required: str) -> Iterator[dict[str, Any]]:
    """The JSON objects in a log that have the key `required`, in order. An object starts at the
    beginning of a line (a reporter prints one compact or indented document there); other text, a
    test runner's own messages around the document, is skipped."""
    decoder = json.JSONDecoder()
    needle = f'"{required}"'
    position = 0
    while True:
        start = log.find("{", position)
        if start < 0:
            return
        position = start + 1
        if start and log[start - 1] != "\n":
            continue
        try:
            value, end = decoder.raw_decode(log, start)
        except ValueError:
            continue
        if isinstance(value, dict) and required in value:
            position = end
            yield value
        elif needle not in log[start:end]:
            position = end  # a whole document without the key: nothing to find inside it


def markers(*patterns: str) -> re.Pattern[str]:
    """One multi-line regex matching any of the patterns."""
    return re.compile("|".join(f"(?:{pattern})" for pattern in patterns), re.MULTILINE)
