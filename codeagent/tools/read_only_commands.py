"""Which shell commands plan mode runs, and the approval modes run without asking: reading ones only.

A line is split into its simple commands by the parser the "always allow" rules use (shell_words.py), so
`ls; rm x` is two commands and both must pass, and a line the parser cannot see through (redirection to a file,
substitution, a subshell, a background job) is refused. A `$` the shell would expand is refused too: its value
is not in the words. Each command's program must be on the list in tools/read_only/programs.yaml, and a
program with options that write a file or run another program (`sort -o`, `rg --pre`, `git grep -O`,
`find -exec`...) runs only with the options listed there, spelt in full, read the way the program's own
parser reads them (option_words.py): an abbreviation (`sort --outp=F`), a cluster (`sort -ro F`), an
`--opt=value` or a glob that may expand to an option (`sort *` beside a file named `-oF`) cannot slip one
through. Anything in doubt is refused with a reason for the model.
"""

from __future__ import annotations

import re

from .option_words import OptionTable, may_become_option, option_refusal, tables
from .shell_words import ASSIGNMENT, expands, mark_expansions, simple_commands, unmarked, unquoted_dollar

SED_PRINT = re.compile(r"^(\d+|\$)?(,(\d+|\$))?p$")  # `sed -n 10,20p FILE`: the only sed plan mode runs
FIND_EXPRESSION_START = ("-", "(", ")", "!", ",")


def refusal(command: str) -> str | None:
    """Why this shell command line does not run without asking, or None when every part of it only reads."""
    if unquoted_dollar(command):
        return "`$` (a variable or substitution) is not expanded in plan mode: write the value itself."
    segments = simple_commands(mark_expansions(command))
    if segments is None:
        return ("only plain read-only commands run in plan mode, joined with `|`, `&&`, `||` or `;`: no redirection "
                "to a file (`>`), no `<`, no `$(...)` or backticks, no subshell, no background job.")
    for words in segments:
        why = _refusal(words)
        if why:
            return why
    return None


def is_read_only_command(command: str) -> bool:
    """True when every part of the line only reads (no refusal): the TUI runs it without asking."""
    return refusal(command) is None


def programs() -> set[str]:
    known = tables()
    return {*known.any_options, *known.programs, "find", "git", "sed"}


def _refusal(words: list[str]) -> str | None:
    program = unmarked(words[0])
    if ASSIGNMENT.match(program):
        return f"`{program}`: setting variables is not allowed in plan mode."
    known = tables()
    if expands(words[0]) or program not in programs():
        allowed = ", ".join(sorted(programs() - {"true"}))
        return f"`{program}` is not a read-only command plan mode runs (it runs: {allowed}; git {_git_list()})."
    arguments = words[1:]
    if program in known.any_options:
        return None
    if program == "git":
        subcommand = unmarked(arguments[0]) if arguments else ""
        if not arguments or expands(arguments[0]) or subcommand not in known.git:
            return f"plan mode runs only these git commands: git {_git_list()} (no options before the command)."
        return option_refusal(f"git {subcommand}", known.git[subcommand], arguments[1:], ("--", "--end-of-options"))
    if program == "sed":
        return _sed_refusal(arguments)
    if program == "find":
        return _find_refusal(arguments)
    return option_refusal(program, known.programs[program], arguments)


def _sed_refusal(arguments: list[str]) -> str | None:
    texts = [unmarked(argument) for argument in arguments]
    if "-n" in texts:
        rest = [argument for argument, text in zip(arguments, texts) if text != "-n"]
        if rest and SED_PRINT.match(unmarked(rest[0])) and not expands(rest[0]) and option_refusal("sed", OptionTable(), rest[1:]) is None:
            return None
    return "plan mode runs sed only as `sed -n 'FIRST,LASTp' FILE` (`sed -i` edits files); or view the file."


def _find_refusal(arguments: list[str]) -> str | None:
    """find's grammar: leading options, starting points, then an expression of listed primaries."""
    grammar = tables().find
    index = 0
    while index < len(arguments):
        text = unmarked(arguments[index])
        if text in grammar["leading_flags"] or text[:2] in grammar["leading_optional"]:
            index += 1
        elif text in grammar["leading_values"]:
            index += 2
        else:
            break
    while index < len(arguments) and not unmarked(arguments[index]).startswith(FIND_EXPRESSION_START):
        if may_become_option(arguments[index]):
            return _find_glob(unmarked(arguments[index]))
        index += 1
    while index < len(arguments):
        word, text = arguments[index], unmarked(arguments[index])
        if expands(word):
            return _find_glob(text)
        if text in grammar["primary_values"]:
            if index + 1 < len(arguments) and expands(arguments[index + 1]):
                return _find_glob(unmarked(arguments[index + 1]))
            index += 2
        elif text in grammar["primaries"]:
            index += 1
        else:
            return (f"`find {text}` is not a primary plan mode runs find with (`-exec`, `-delete`, `-fprint`... "
                    "write a file or run a program; the reading ones are: "
                    f"{' '.join(sorted(grammar['primaries'] | grammar['primary_values']))}).")
    return None


def _find_glob(text: str) -> str:
    return f"`find ... {text}`: quote the pattern (`'{text}'`): the shell would expand it before find reads it."


def _git_list() -> str:
    return "/".join(sorted(tables().git))
