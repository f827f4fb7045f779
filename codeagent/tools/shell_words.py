"""A shell command line as its simple commands, for the rules that vouch for commands by their words.

Used by the TUI's "always allow" rules (a rule for `pytest` allows `pytest -x tests`, never
`pytest; rm -rf /`) and by plan mode's read-only commands (read_only_commands.py). A line is
understood only when every part of it can be seen in its words: command substitution, process
substitution, subshells, background jobs and redirections other than to /dev/null or between
stdout and stderr make it opaque (None), and an opaque line is never vouched for.
"""

from __future__ import annotations

import re
import shlex

# Programs whose first argument names what they do (`git status` is not `git push`).
SUBCOMMAND_PROGRAMS = {"git", "pip", "pip3", "npm", "npx", "yarn", "pnpm", "cargo", "go", "uv", "poetry",
                       "conda", "docker", "kubectl", "make", "bundle", "rake", "dotnet", "mvn", "gradle"}
PYTHONS = {"python", "python3"}
SEPARATORS = {";", "&&", "||", "|", "|&"}
PUNCTUATION = set("();<>|&")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def simple_commands(command: str) -> list[list[str]] | None:
    """The words of each simple command in a shell command line (quotes removed), or None when the
    line does something its words do not show."""
    if "`" in command or "$(" in command or "<(" in command or ">(" in command:
        return None
    lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""  # shlex would end `ls a#; rm x` at the `#`, where bash goes on to run `rm x`
    try:
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes
        return None
    segments: list[list[str]] = [[]]
    index = 0
    while index < len(tokens):
        token = tokens[index]
        following = tokens[index + 1] if index + 1 < len(tokens) else ""
        if token in SEPARATORS:
            segments.append([])
        elif token in (">", ">>", "&>") and following == "/dev/null" or token == ">&" and following in ("1", "2"):
            _drop_fd(segments[-1])
            index += 1
        elif token and all(char in PUNCTUATION for char in token):
            return None  # other redirections, subshells, background jobs
        else:
            segments[-1].append(token)
        index += 1
    segments = [words for words in segments if words]
    return segments or None


def command_prefixes(command: str) -> list[tuple[str, ...]] | None:
    """The prefix of each simple command in a shell command line, or None when the line does
    something a prefix rule cannot vouch for (then it is always asked about)."""
    segments = simple_commands(command)
    return [_prefix(words) for words in segments] if segments else None


def _drop_fd(words: list[str]) -> None:
    if words and words[-1] in ("1", "2"):  # the `2` of `2>/dev/null`
        words.pop()


def _prefix(words: list[str]) -> tuple[str, ...]:
    """`git status`, `python -m pytest`, `ls`; variable assignments in front belong to it."""
    assignments = 0
    while assignments < len(words) - 1 and ASSIGNMENT.match(words[assignments]):
        assignments += 1
    head, words = tuple(words[:assignments]), words[assignments:]
    program = words[0]
    if program in PYTHONS and len(words) >= 3 and words[1] == "-m":
        return head + tuple(words[:3])
    if program in SUBCOMMAND_PROGRAMS and len(words) >= 2 and not words[1].startswith("-"):
        return head + tuple(words[:2])
    return head + (program,)


def unquoted_dollar(command: str) -> bool:
    """True when the line has a `$` the shell may expand (outside single quotes, not escaped):
    a variable's value is not in the words, so nothing can be vouched for it."""
    quote = ""
    escaped = False
    for index, char in enumerate(command):
        if escaped:
            escaped = False
        elif quote == "'":
            quote = "" if char == "'" else quote
        elif char == "\\":
            escaped = True
        elif char == "'" and not quote:
            quote = "'"
        elif char == '"':
            quote = "" if quote == '"' else '"'
        elif char == "$" and (_EXPANDS.match(command, index + 1) or not quote and _QUOTINGS.match(command, index + 1)):
            return True
    return False


_EXPANDS = re.compile(r"[A-Za-z0-9_{(@*#?$!-]")  # what follows a `$` the shell expands (`x$` is a plain `$`)
_QUOTINGS = re.compile(r"['\"]")  # `$'...'` and `$"..."` outside quotes: quotings whose words shlex gets wrong


# Unquoted characters with which bash makes other words of a word (globs, brace expansion), marked so that a
# reader of the words knows which of their characters the shell will expand.
EXPANDING = {"*": "\ue000", "?": "\ue001", "[": "\ue002", "{": "\ue003", "}": "\ue004", ",": "\ue005"}
_UNMARK = str.maketrans({mark: char for char, mark in EXPANDING.items()})
_BRACES = re.compile("\ue003[^\ue004]*(\ue005|\\.\\.)[^\ue004]*\ue004")


def mark_expansions(command: str) -> str:
    """The line with each unquoted glob or brace character replaced by its mark (EXPANDING)."""
    marked = []
    quote = ""
    escaped = False
    for char in command:
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in EXPANDING:
            char = EXPANDING[char]
        marked.append(char)
    return "".join(marked)


def unmarked(word: str) -> str:
    """A word of a marked line as the shell's words show it before expansion."""
    return word.translate(_UNMARK)


def expands(word: str) -> bool:
    """True when bash may make this word of a marked line into other words: a glob, or a brace expansion."""
    return any(mark in word for mark in "\ue000\ue001\ue002") or bool(_BRACES.search(word))
