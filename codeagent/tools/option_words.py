"""A command's words read as its option parser reads them, against the options a table lists.

The tables live in tools/read_only/programs.yaml (what each is, and why some options are left out, is said
there). The reading follows GNU getopt_long and git's parse-options: `--name`, `--name=value` and
`--name value`; short options clustered (`-rn`), a value option taking the rest of the word or the next
word; `--` ends the options (git's `--end-of-options` too); options may come after operands. An option is
accepted only when it is listed word for word, so an abbreviation (`--outp`) that the program would expand to an
option that writes or runs is refused, as is anything else not listed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

import yaml

from ..assets import asset_path
from .shell_words import expands, unmarked

FLAG, VALUE, OPTIONAL = "flag", "value", "optional"


@dataclass(frozen=True)
class OptionTable:
    """The options one program (or git subcommand) runs with: name -> FLAG, VALUE or OPTIONAL."""

    options: dict[str, str] = field(default_factory=dict)
    numeric: bool = False  # `-NUM` (`git log -3`)
    next_word_values: bool = False  # a value option in a cluster reads the next word (tree), not the rest
    max_operands: int | None = None


@dataclass(frozen=True)
class Tables:
    any_options: frozenset[str]
    programs: dict[str, OptionTable]
    git: dict[str, OptionTable]
    find: dict[str, frozenset[str]]


@cache
def tables() -> Tables:
    data = yaml.safe_load(asset_path("tools", "read_only", "programs.yaml").read_text())
    groups = data["git"]["groups"]
    programs = {name: _table(spec) for name, spec in data["programs"].items() if name != "find"}
    git = {name: _table(spec, [groups[group] for group in spec.get("include", [])])
           for name, spec in data["git"]["subcommands"].items()}
    find = {key: frozenset(str(value).split()) for key, value in data["programs"]["find"].items()}
    return Tables(frozenset(data["any_options"]), programs, git, find)


def _table(spec: dict[str, Any], included: list[dict[str, Any]] | None = None) -> OptionTable:
    parts = [*(included or []), spec]
    options: dict[str, str] = {}
    for part in parts:
        for kind in (FLAG, VALUE, OPTIONAL):
            for name in str(part.get(kind + "s" if kind != OPTIONAL else kind, "")).split():
                if options.setdefault(name, kind) != kind:
                    raise ValueError(f"read_only/programs.yaml lists {name} as {options[name]} and as {kind}")
    return OptionTable(options=options, numeric=any(part.get("numeric") for part in parts),
                       next_word_values=spec.get("cluster_values") == "next_word",
                       max_operands=spec.get("max_operands"))


def may_become_option(word: str) -> bool:
    """True when the shell may expand this word (of a marked line) into one that starts with `-`."""
    return expands(word) and (word[0] in "\ue000\ue001\ue002\ue003")


def option_refusal(label: str, table: OptionTable, words: list[str], end_words: tuple[str, ...] = ("--",)) -> str | None:
    """Why `label words...` is refused: an option the table does not list, a value that looks like an option,
    a word the shell may expand into an option, or too many operands. None when every word passes."""
    operands = 0
    index = 0
    while index < len(words):
        word = words[index]
        text = unmarked(word)
        index += 1
        if text in end_words:
            operands += len(words) - index
            break
        if may_become_option(word):
            return (f"`{label} {text}`: the shell may expand `{text}` into an option (a file named `-o...`): "
                    f"write `./{text}`, or put `--` before it.")
        if text == "-" or not text.startswith("-"):
            operands += 1
            continue
        why, index = _option(label, table, text, words, index)
        if why:
            return why
    if table.max_operands is not None and (operands > table.max_operands or any(expands(w) for w in words)):
        return f"`{label}` with more than {table.max_operands} file(s) writes the last one: not without asking."
    return None


def _option(label: str, table: OptionTable, text: str, words: list[str], index: int) -> tuple[str | None, int]:
    if text.startswith("--"):
        name, equals, _ = text.partition("=")
        kind = table.options.get(name)
        if kind is None or not name[2:]:
            return _unknown(label, name), index
        if kind == FLAG and equals:
            return f"`{label} {name}` takes no value.", index
        if kind == VALUE and not equals:
            return _next_value(label, name, words, index)
        return None, index
    if table.numeric and text[1:].isdigit():
        return None, index
    letters = text[1:]
    position = 0
    while position < len(letters):
        name = "-" + letters[position]
        kind = table.options.get(name)
        position += 1
        if kind is None:
            return _unknown(label, name, text), index
        if kind == OPTIONAL:
            return None, index
        if kind == VALUE:
            if table.next_word_values:
                why, index = _next_value(label, name, words, index)
                if why:
                    return why, index
            elif position < len(letters):
                return None, index
            else:
                return _next_value(label, name, words, index)
    return None, index


def _next_value(label: str, name: str, words: list[str], index: int) -> tuple[str | None, int]:
    if index >= len(words):
        return None, index
    value = unmarked(words[index])
    if value.startswith("-") or may_become_option(words[index]):
        return (f"`{label} {name} {value}`: a value that starts with `-` (or may expand to one) is not taken "
                f"apart from its option here: write `{name}={value}` or `{name}{value}`."), index + 1
    return None, index + 1


def _unknown(label: str, name: str, word: str = "") -> str:
    where = f" (in `{word}`)" if word and word != name else ""
    return (f"`{label} {name}`{where}: not an option that runs without asking. Commands run without asking only "
            "with the options known to read, spelt in full (options that write a file or run a program are "
            "refused, and so are abbreviations): spell the option out, or leave it out.")
