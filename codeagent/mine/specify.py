"""What a statement must state so that a correct fix can pass the task's tests (SWE-bench Verified's
"well-specified"): the names the tests use that the fix adds (a new function, method, type, field) and
the messages the fix writes that the tests compare verbatim. A statement that leaves one out is
underspecified: a fix with another name or other wording fails (`unstated`).

With a model (`--statement-model`), the statement is written from the tests, the failures they show
before the fix and these requirements, never from the fix itself (`write_statement`), then checked the
same way.
"""

from __future__ import annotations

import re
from typing import Any

from .. import patches
from .split import SOURCE, TEST, kind_of

_DEFINITIONS = [re.compile(pattern, re.M) for pattern in (
    r"^\s*(?:async\s+)?def\s+(\w+)",  # Python
    r"^\s*class\s+(\w+)",  # Python, JavaScript, Java...
    r"^\s*func\s+(?:\([^)]*\)\s*)?(\w+)",  # Go
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:(?:const|async|unsafe|extern)\s+)*fn\s+(\w+)",  # Rust
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:struct|enum|trait|type)\s+(\w+)",  # Rust, Go types
    r"^\s*(?:export\s+)?(?:default\s+)?(?:async\s+)?function\s*\*?\s*(\w+)",  # JavaScript
    r"^\s*(?:export\s+)?(?:const|let|var)\s+(\w+)\s*=",  # JavaScript
    r"^\s*(?:export\s+)?(?:interface|type|enum)\s+(\w+)",  # TypeScript
    r"^\s*(?:public|protected)\s+(?:(?:static|final|abstract|synchronized|default)\s+)*[\w<>\[\],.? ]+?\s+(\w+)\s*\(",  # Java
    r"^\s*([A-Z]\w+)\s+(?:\*|\[\])?[\w.]+\s*(?:`[^`]*`)?\s*(?://.*)?$",  # a Go struct's exported field
)]
_STRING = re.compile(r"\"((?:[^\"\\\n]|\\.)*)\"|'((?:[^'\\\n]|\\.)*)'|`([^`]*)`")
_PLACEHOLDER = re.compile(r"%[-#+ 0-9.*]*[a-zA-Z]|\{[^{}]*\}|\$\{[^}]*\}|\\[ntr]")
MIN_NAME, MIN_MESSAGE = 3, 12


def _lines(patch: str, kind: str, sign: str) -> list[str]:
    return [line[1:] for diff in patches.parse(patch) if kind_of(diff.new or diff.old or "") == kind
            for hunk in diff.hunks for line in hunk.lines if line[:1] == sign]


def requirements(gold_patch: str, test_patch: str) -> list[str]:
    """The names and messages the tests check that the fix introduces (see the module docstring)."""
    added, known = _lines(gold_patch, SOURCE, "+"), _lines(gold_patch, SOURCE, "-") + _lines(gold_patch, SOURCE, " ")
    tests = "\n".join(_lines(test_patch, TEST, "+"))
    tests_before = "\n".join(_lines(test_patch, TEST, " ") + _lines(test_patch, TEST, "-"))
    before = "\n".join(known)
    words = set(re.findall(r"\b\w+\b", tests))
    existing = set(re.findall(r"\b\w+\b", before + "\n" + tests_before))
    names = [name for line in added for pattern in _DEFINITIONS for name in pattern.findall(line)
             if len(name) >= MIN_NAME and name in words and name not in existing]
    messages = []
    for line in added:
        for match in _STRING.finditer(line):
            literal = next(group for group in match.groups() if group is not None)
            for fragment in _PLACEHOLDER.split(literal):
                fragment = fragment.strip(" :;,.-'\"")
                if len(fragment) >= MIN_MESSAGE and " " in fragment and fragment in tests and fragment not in before:
                    messages.append(fragment)
    return list(dict.fromkeys(names + messages))


def unstated(text: str, required: list[str]) -> list[str]:
    """The requirements the statement does not state (a name as a word, a message verbatim but for spacing)."""
    flat = " ".join(text.split())
    missing = []
    for item in required:
        if re.fullmatch(r"\w+", item):
            if not re.search(rf"(?<![\w]){re.escape(item)}(?![\w])", text):
                missing.append(item)
        elif " ".join(item.split()) not in flat:
            missing.append(item)
    return missing


def underspecified(text: str, required: list[str]) -> str | None:
    """Why the statement is underspecified (None: it states all that the tests check)."""
    missing = unstated(text, required)
    if not missing:
        return None
    shown = ", ".join(repr(item) for item in missing[:4]) + (", ..." if len(missing) > 4 else "")
    return f"statement underspecified: the tests check {shown}, which it does not state"


def write_statement(model: Any, *, repo: str, history_text: str, test_patch: str, fail_to_pass: list[str],
                    failures: str, required: list[str]) -> str:
    """A statement written by `model` from the tests, their failures before the fix and what they require
    (never the fix): the problem as an issue would state it."""
    from jinja2 import Environment, StrictUndefined

    from ..assets import asset_path
    from ..models.types import Sampling

    template = Environment(undefined=StrictUndefined, keep_trailing_newline=True).from_string(
        asset_path("prompts", "mine", "statement.j2").read_text())
    prompt = template.render(repo=repo, history=history_text.strip()[:4000], tests=test_patch[:16000],
                             fail_to_pass=fail_to_pass[:50], failures=failures[:6000], required=required)
    reply = model.complete([{"role": "user", "content": prompt}], [], Sampling(temperature=0.0, max_tokens=1500))
    text = (reply.content or "").strip()
    fenced = re.fullmatch(r"```\w*\n(.*)\n```", text, re.S)
    return (fenced.group(1) if fenced else text).strip()
