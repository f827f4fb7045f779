"""The problem statement of a mined task: the commit message, with the text of the issues it references
when they are at hand (`--issues FILE`: the history itself rarely carries them), and the leak check: a
statement must not hold the fix's code (SWE-bench+ found the solution in the issue text of a third of
the passes). Only source lines count: a changelog entry that repeats the subject is no leak."""

from __future__ import annotations

import re

from .. import patches
from .split import SOURCE, kind_of

MIN_LEAK = 20  # an added line shorter than this ("return None") is too common to be a leak
_REFERENCE = re.compile(r"(?:(?:close|fix|resolve)[sd]?\s+)?#(\d+)\b", re.I)
_MERGE = re.compile(r"^Merge (?:pull request|branch) .*$", re.M)


def referenced_issues(message: str) -> list[str]:
    """Issue numbers a message names (#123, Fixes #123), each once."""
    return list(dict.fromkeys(match.group(1) for match in _REFERENCE.finditer(message)))


def statement(message: str, issues: dict[str, str] | None = None) -> str:
    """The commit message (a merge's own line dropped when a description follows it), then the text of
    each referenced issue found in `issues` (number -> text)."""
    text = message.strip()
    body = _MERGE.sub("", text).strip()
    text = body or text
    for number in referenced_issues(message):
        if issues and issues.get(number):
            text += f"\n\nIssue #{number}:\n{issues[number].strip()}"
    return text


def added_code(gold_patch: str) -> list[str]:
    """The added source lines of a patch worth checking for (stripped, at least MIN_LEAK characters)."""
    lines = []
    for diff in patches.parse(gold_patch):
        if diff.new is None or kind_of(diff.new) != SOURCE:
            continue
        for hunk in diff.hunks:
            for line in hunk.lines:
                if line.startswith("+") and len(code := line[1:].strip()) >= MIN_LEAK:
                    lines.append(code)
    return list(dict.fromkeys(lines))


def leaks(text: str, gold_patch: str) -> list[str]:
    """The added code lines of the gold patch that the statement holds (empty: no leak)."""
    flat = " ".join(text.split())
    return [line for line in added_code(gold_patch) if " ".join(line.split()) in flat]
