"""Shell command lines split into simple commands, and which lines only read.

`simple_commands` is the approval rules' parser (tui/approval.py builds its prefix rules on it):
the words of each simple command, or None when the line does something a reader of its words
cannot vouch for (command substitution, subshells, background jobs, redirections other than to
/dev/null and between stdout and stderr).

`is_read_only_command` says whether a line only reads: every simple command in it is on a short
allow-list (ls, cat, head, tail, wc, pwd, git status/log/diff/show, grep, rg) without an option
that writes a file or runs another program. `cat a; rm b` is not read-only, nor is `cat a > b`.
"""

from __future__ import annotations

import re
import shlex

SEPARATORS = {";", "&&", "||", "|", "|&"}
PUNCTUATION = set("();<>|&")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

READERS = {"ls", "cat", "head", "tail", "wc", "pwd", "grep", "rg"}
GIT_READERS = {"status", "log", "diff", "show"}
# Options that write a file, wait forever, or run a program named in the arguments or the repository.
REFUSED_OPTIONS = {
    "tail": ("-f", "-F", "--follow"),
    "rg": ("--pre",),
    "git": ("--output", "--ext-diff", "--textconv"),  # git's own options (`git -c`) come before the subcommand
}


def simple_commands(command: str) -> list[list[str]] | None:
    """The words of each simple command in a shell line (empty ones left out), or None (see above)."""
    if "`" in command or "$(" in command or "<(" in command or ">(" in command:
        return None
    lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
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
            if segments[-1] and segments[-1][-1] in ("1", "2"):  # the `2` of `2>/dev/null`
                segments[-1].pop()
            index += 1
        elif token and all(char in PUNCTUATION for char in token):
            return None  # other redirections, subshells, background jobs
        else:
            segments[-1].append(token)
        index += 1
    return [words for words in segments if words] or None


def is_read_only_command(command: str) -> bool:
    """True when every simple command of the line only reads (see the module docstring)."""
    segments = simple_commands(command)
    return segments is not None and all(_reads(words) for words in segments)


def _reads(words: list[str]) -> bool:
    program, arguments = words[0], words[1:]
    if program == "git":
        if not arguments or arguments[0] not in GIT_READERS:
            return False  # `git -c ...`, `git push`
    elif program not in READERS:  # an assignment in front (`GIT_EXTERNAL_DIFF=x git diff`) is not a reader either
        return False
    refused = REFUSED_OPTIONS.get(program, ())
    return not any(word == option or word.startswith(option + "=") or _short_cluster(word, option)
                   for word in arguments for option in refused)


def _short_cluster(word: str, option: str) -> bool:
    """`-fn` holds `-f` (single-letter options cluster)."""
    return len(option) == 2 and word.startswith("-") and not word.startswith("--") and option[1] in word[1:]
