"""The problem statement of a mined task from its history: the pull request's title and body (a merge's
message, its merge line dropped) or the commit's message, with the text of the issues it references when
they are at hand (`--issues FILE`, or the pull request's own text when that file holds it under its number).
A statement that is only a merge line, a version or a ticket number says nothing (`says_nothing`).

The leak check: a statement must not hold the fix's code (SWE-bench+ found the solution in the issue text
of a third of the passes). Only source lines that hold logic count: a name, a signature or a message the
statement legitimately states (what the tests check: specify.py) is no leak, nor a changelog entry."""

from __future__ import annotations

import re

from .. import patches
from .split import SOURCE, kind_of

MIN_LEAK = 20  # an added line shorter than this ("return None") is too common to be a leak
_REFERENCE = re.compile(r"(?:(?:close|fix|resolve)[sd]?\s+)?(?:#|\bGH-)(\d+)\b", re.I)
_MERGE_LINE = re.compile(r"^(?:Merge pull request #\d+ from \S+|Merge (?:remote-tracking )?branch '[^']*'.*|"
                         r"Merged in \S+ \(pull request #\d+\)|Merge (?:tag|commit) .*)$", re.M)
_BRANCH_ISSUE = re.compile(r"^Merge pull request #\d+ from \S+?/(?:[\w.-]*?(?:issues?|gh|fix|bug)[-_/]?)?(\d{2,})(?:\D|$)",
                           re.I | re.M)
_TRAILER = re.compile(r"^(?:Signed-off-by|Co-authored-by|Co-Authored-By|Reviewed-by|Acked-by|Change-Id|"
                      r"Reported-by|Tested-by|Cc):.*$", re.M)
# Words that, with versions, ticket numbers and merge lines, make a statement that says nothing.
_EMPTY_WORDS = frozenset({"merge", "merged", "branch", "pull", "request", "from", "into", "remote", "tracking", "origin",
                          "master", "main", "release", "released", "releasing", "version", "bump", "bumped",
                          "proposed", "prepare", "preparing", "for", "to", "the", "v", "update", "updated", "changelog",
                          "changes", "wip", "fix", "fixes", "fixed", "closes", "see", "issue", "ticket", "and", "a", "of",
                          "pr", "tag", "dev", "back", "post", "pre", "final", "candidate", "rc", "minor", "patch", "major"})
_SIGNATURE = re.compile(r"^(?:(?:export|public|private|protected|static|async|pub(?:\(\w+\))?|final|abstract|override|"
                        r"inline|virtual|const|unsafe|extern)\s+)*(?:def|func|fn|function|class|struct|interface|type|enum|"
                        r"trait|impl|module|namespace|record)\b")
_LOGIC = re.compile(r"(?<![=!<>+\-*/%&|^])=(?![=>])|:=|\breturn\b|\bif\b|\belse\b|\bfor\b|\bwhile\b|&&|\|\||=>|"
                    r"\braise\b|\bthrow\b|[-+*/%]=|\?\s*\S+\s*:|[\w)\]\"]\s*[-+/%]\s*[\w(\"]")
_STRING = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|`[^`]*`")


def referenced_issues(message: str) -> list[str]:
    """Issue numbers a message names (#123, Fixes #123, GH-123; a pull request's branch named after one:
    `from someone/8720_viewcode`, `issue-6428`), each once, the pull request's own number first."""
    found = [match.group(1) for match in _REFERENCE.finditer(message)]
    found += [match.group(1) for match in _BRANCH_ISSUE.finditer(message)]
    return list(dict.fromkeys(found))


def statement(message: str, issues: dict[str, str] | None = None) -> str:
    """The message without its merge line and trailers (the merge line itself when nothing else is left),
    then the text of each referenced issue (or pull request) found in `issues` (number -> text)."""
    text = message.strip()
    body = _TRAILER.sub("", _MERGE_LINE.sub("", text)).strip()
    text = re.sub(r"\n{3,}", "\n\n", body) or text
    for number in referenced_issues(message):
        if issues and issues.get(number):
            text += f"\n\nIssue #{number}:\n{issues[number].strip()}"
    return text


def says_nothing(text: str) -> str | None:
    """Why a statement gives a solver nothing to act on (only a merge line, a version, a ticket number);
    None: it says something."""
    rest = _MERGE_LINE.sub(" ", text)
    rest = re.sub(r"(?:#|\bGH-|\b[A-Z][A-Z0-9]+-)\d+\b", " ", rest)  # tickets
    rest = re.sub(r"\bv?\d+(?:\.\d+)+(?:[-.]?(?:dev|rc|a|b|post)\d*)?\b", " ", rest)  # versions
    words = [word for word in re.findall(r"[A-Za-z_][\w-]*", rest) if word.lower() not in _EMPTY_WORDS]
    if len(words) >= 2:  # "implement CopyToGoFlagSet" names what to do; "Proposed 2.8.0" does not
        return None
    flat = " ".join(text.split())
    return f"the statement says nothing to act on: {flat[:100]!r}"


def added_code(gold_patch: str) -> list[str]:
    """The added source lines of a patch that hold logic (stripped, at least MIN_LEAK characters): not a
    lone name, a signature, a declaration or a string the statement may state."""
    lines = []
    for diff in patches.parse(gold_patch):
        if diff.new is None or kind_of(diff.new) != SOURCE:
            continue
        for hunk in diff.hunks:
            for line in hunk.lines:
                if line.startswith("+") and len(code := line[1:].strip()) >= MIN_LEAK and holds_logic(code):
                    lines.append(code)
    return list(dict.fromkeys(lines))


def holds_logic(code: str) -> bool:
    """Is this line of code more than a name, a signature or a message: an assignment, a branch, a return?"""
    code = _STRING.sub('""', code)
    code = re.split(r"\s#|^#|//", code, maxsplit=1)[0].strip()  # a trailing comment
    if not code or _SIGNATURE.match(code):
        return False
    return bool(_LOGIC.search(code))


def leaks(text: str, gold_patch: str) -> list[str]:
    """The added code lines of the gold patch that the statement holds (empty: no leak)."""
    flat = " ".join(text.split())
    return [line for line in added_code(gold_patch) if " ".join(line.split()) in flat]
