"""Which shell commands plan mode runs: reading ones only, checked word by word.

A line is split into its simple commands by the parser the "always allow" rules use
(shell_words.py), so `ls; rm x` is two commands and both must pass, and a line the parser cannot
see through (redirection to a file, substitution, a subshell, a background job) is refused. Each
command's program must be on the allow-list below, and the options with which a reading program
writes or runs another program (`find -delete`, `find -exec`, `sed -i`, `sort -o`, `rg --pre`,
`git diff --output`...) are refused. A `$` the shell would expand is refused too: its value is not
in the words. Anything in doubt is refused with a reason for the model.
"""

from __future__ import annotations

import re

from .shell_words import ASSIGNMENT, simple_commands, unquoted_dollar

PROGRAMS = {"ls", "cat", "head", "tail", "wc", "find", "grep", "egrep", "fgrep", "rg", "git", "pwd", "echo", "cd",
            "file", "stat", "du", "sort", "uniq", "cut", "nl", "diff", "cmp", "basename", "dirname", "realpath",
            "readlink", "which", "sed", "tree", "true"}
GIT_SUBCOMMANDS = {"log", "diff", "status", "show", "blame", "grep", "ls-files", "ls-tree", "rev-parse",
                   "describe", "shortlog", "cat-file"}
# Options with which an otherwise reading program writes a file or runs a program.
FORBIDDEN = {
    "find": ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"),
    "rg": ("--pre",),
    "git": ("--output", "--ext-diff", "-O", "--open-files-in-pager", "--textconv"),
    "sort": ("-o", "--output", "--compress-program"),
    "tree": ("-o",),
    "file": ("-C", "--compile"),  # writes a compiled magic file
}
SED_PRINT = re.compile(r"^(\d+|\$)?(,(\d+|\$))?p$")  # `sed -n 10,20p FILE`: the only sed plan mode runs


def refusal(command: str) -> str | None:
    """Why plan mode does not run this shell command line, or None when every part of it only reads."""
    if unquoted_dollar(command):
        return "`$` (a variable or substitution) is not expanded in plan mode: write the value itself."
    segments = simple_commands(command)
    if segments is None:
        return ("only plain read-only commands run in plan mode, joined with `|`, `&&`, `||` or `;`: no redirection "
                "to a file (`>`), no `<`, no `$(...)` or backticks, no subshell, no background job.")
    for words in segments:
        why = _refusal(words)
        if why:
            return why
    return None


def _refusal(words: list[str]) -> str | None:
    program = words[0]
    if ASSIGNMENT.match(program):
        return f"`{program}`: setting variables is not allowed in plan mode."
    if program not in PROGRAMS:
        allowed = ", ".join(sorted(PROGRAMS - {"true"}))
        return f"`{program}` is not a read-only command plan mode runs (it runs: {allowed}; git {_git_list()})."
    arguments = words[1:]
    if program == "git":
        if not arguments or arguments[0] not in GIT_SUBCOMMANDS:
            return f"plan mode runs only these git commands: git {_git_list()} (no options before the command)."
    for argument in arguments:
        for option in FORBIDDEN.get(program, ()):
            if argument == option or argument.startswith(option + "=") or (
                    len(option) == 2 and argument.startswith(option)):  # `-ofile`, `-Ocmd`
                return f"`{program} {option}` writes a file or runs a program: not in plan mode."
    if program == "sort" and any(re.match(r"^-[^-]*o", argument) for argument in arguments):
        return "`sort -o` writes a file: not in plan mode."
    if program == "sed":
        return _sed_refusal(arguments)
    if program == "uniq" and len([a for a in arguments if not a.startswith("-")]) > 1:
        return "`uniq IN OUT` writes OUT: give uniq one input at most in plan mode."
    return None


def _sed_refusal(arguments: list[str]) -> str | None:
    if "-n" in arguments:
        rest = [argument for argument in arguments if argument != "-n"]
        if rest and SED_PRINT.match(rest[0]) and not any(argument.startswith("-") for argument in rest[1:]):
            return None
    return "plan mode runs sed only as `sed -n 'FIRST,LASTp' FILE` (`sed -i` edits files); or view the file."


def _git_list() -> str:
    return "/".join(sorted(GIT_SUBCOMMANDS))


def is_read_only_command(command: str) -> bool:
    """True when every part of the line only reads (no refusal): the TUI runs it without asking."""
    return refusal(command) is None
