"""The commands that run without asking (plan mode, and the approval modes' read-only commands) read, whatever
the spelling: every program on the list is tried with every option of the list's programs that writes a file
or runs a program, spelt in full, abbreviated (GNU getopt and git expand `--outp` to `--output`), with `=value`
or a separate value, clustered with other short options, after an operand, and behind a glob or brace that the
shell expands into the option. Each spelling of a program's own dangerous options is refused; whatever is let
through is run for real here and must neither write a file nor run a program; and the option tables agree with
the real programs' parsers."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from codeagent.tools.option_words import FLAG, OPTIONAL, VALUE, tables
from codeagent.tools.read_only_commands import programs, refusal

RUN = "./run.sh"  # a program a command must never start: it leaves `ran` behind
# The options with which each program on the list writes a file or runs one: (option, value or None).
DANGEROUS = {
    "sort": [("--output", "written"), ("--compress-program", RUN), ("--temporary-directory", "."), ("-o", "written"),
             ("-T", ".")],
    "file": [("--compile", None), ("-C", None), ("--uncompress", None), ("-z", None), ("--preserve-date", None),
             ("-p", None), ("--no-sandbox", None), ("-S", None)],
    "diff": [("--paginate", None), ("-l", None)],
    "rg": [("--pre", RUN), ("--pre-glob", "*"), ("--search-zip", None), ("-z", None), ("--hostname-bin", RUN)],
    "tree": [("-o", "written")],
    "git log": [("--output", "written"), ("--ext-diff", None), ("--textconv", None)],
    "git show": [("--output", "written"), ("--ext-diff", None), ("--textconv", None)],
    "git diff": [("--output", "written"), ("--ext-diff", None), ("--textconv", None)],
    "git grep": [("--open-files-in-pager", RUN), ("-O", RUN), ("--textconv", None)],
    "git cat-file": [("--textconv", None), ("--filters", None)],
    "git describe": [("--dirty", None), ("--broken", None)],
    "find": [("-exec", f"{RUN} ;"), ("-execdir", f"{RUN} ;"), ("-ok", f"{RUN} ;"), ("-okdir", f"{RUN} ;"),
             ("-delete", None), ("-fprint", "written"), ("-fprint0", "written"), ("-fprintf", "written x"),
             ("-fls", "written")],
    "sed": [("-i", None), ("--in-place", None), ("-s", None)],
}
EVERY_OPTION = sorted({option for options in DANGEROUS.values() for option in options})


def commands() -> list[str]:
    """Every program on the list, and every git subcommand it runs."""
    return sorted(programs() - {"git"}) + [f"git {subcommand}" for subcommand in tables().git]


def spellings(option: str, value: str | None) -> list[list[str]]:
    """The words of an option as a program's parser would still read it: abbreviations, `=`, clusters."""
    if option.startswith("--"):
        names = [option[:length] for length in range(3, len(option) + 1)]
        if value is None:
            return [[name] for name in names]
        return [form for name in names for form in ([f"{name}={value}"], [name, value])]
    if len(option) == 2 and not option[1:].isdigit():
        attached = [[option + value], ["-n" + option[1:] + value]] if value else [["-n" + option[1:]]]
        return [[option] + ([value] if value else []), *attached]
    return [[option] + (value.split() if value else [])]


def variants(command: str) -> list[str]:
    """A program's dangerous options in every spelling, except a prefix that is itself another, listed option
    (`--text` of `--textconv`): getopt and git read an exact name as that option."""
    table = tables().git.get(command.removeprefix("git ")) or tables().programs.get(command)
    out = []
    for option, value in DANGEROUS.get(command, []):
        for words in spellings(option, value):
            name = words[0].split("=")[0]
            if table and name != option and name.startswith("--") and name in table.options:
                continue
            quoted = " ".join(f"'{word}'" if word in (";", "*") else word for word in words)
            out += [f"{command} {quoted} a", f"{command} a {quoted}", f"{command} -n a {quoted}"]
    return out


@pytest.mark.parametrize("command", sorted(DANGEROUS))
def test_every_spelling_of_an_option_that_writes_or_runs_is_refused(command):
    tried = variants(command)
    assert len(tried) >= 3
    let_through = [variant for variant in tried if refusal(variant) is None]
    assert not let_through, let_through


@pytest.mark.parametrize("command", commands())
def test_a_glob_or_brace_that_may_expand_into_an_option_is_refused_before_double_dash(command):
    if command.split()[0] in tables().any_options:
        assert refusal(f"{command} *") is None  # no option of these writes or runs: a glob is harmless
        return
    for line in (f"{command} *", f"{command} x {{--output=y,z}}", f"{command} ?x", f"{command} [-]o"):
        assert refusal(line), line
    assert refusal(f"{command} ./*") is None or command in ("sed", "git cat-file", "uniq")


def test_the_spellings_of_the_issue_and_their_neighbours():
    refused = ["sort --outp=/tmp/x a", "sort --compress-prog=sh a", "git grep --open-files-in-pager=x a",
               "git grep --open=x a", "git grep -nOx a", "file --comp -m x", "sort -ro out in", "sort -o/tmp/x a",
               "sort -k -o x", "sort --key -o x", "tree -Lo 2 x", "git log --output x", "git show --ou=x",
               "uniq -c a b", "uniq a*", "find . -name *.py", "sed -n 1p f -i", "sed -n 1p *", "git {log,push}",
               "{ls,rm} x", "git log {--output=x,HEAD}", "s?rt a"]
    for line in refused:
        assert refusal(line), line
    passed = ["sort -k2,2 -t, a", "sort -rn a", "sort --key=2 --field-separator , a", "uniq -f 1 a", "uniq -c",
              "git log -pS foo --oneline -10", "git show HEAD@{1} --stat", "git grep -n -5 foo -- '*.py'",
              "git diff -U5 --word-diff=color", "tree -dL 2 src", "sed -n 1,5p ./*.py", "find src* -type f",
              "find -L . -maxdepth 2 -name '*.py' -print", "file -b --mime-type a", "diff -u a b", "git log -- *.py",
              "git log --end-of-options --output=x", "rg -n foo -g '*.py' src", "cat *", "grep -rn x *"]
    for line in passed:
        assert refusal(line) is None, (line, refusal(line))


@pytest.fixture(scope="module")
def playground(tmp_path_factory) -> Path:
    """A git repository with a file a command could overwrite and `run.sh`, which leaves `ran` if started."""
    root = tmp_path_factory.mktemp("playground")
    (root / "a").write_text("".join(f"line {n}\n" for n in range(3000)))
    (root / "run.sh").write_text("#!/bin/sh\ntouch \"$(dirname \"$0\")/ran\"\ncat\n")
    (root / "run.sh").chmod(0o755)
    for command in (["init", "-q"], ["add", "a"], ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x"]):
        subprocess.run(["git", *command], cwd=root, check=True)
    return root


def test_whatever_runs_without_asking_writes_nothing_and_runs_nothing(playground):
    """Run for real, in one shell: every line let through of every command on the list × every dangerous option
    of any program in every spelling, and each option of the programs whose options are not checked (from their
    own --help, a value where it takes one). Nothing is written (no new file, no file changed) and nothing runs."""
    lines = []
    for command in commands():
        if command.split()[0] in tables().any_options:
            continue
        for option, value in EVERY_OPTION:
            for words in spellings(option, value):
                quoted = " ".join(f"'{word}'" if word in (";", "*") else word for word in words)
                lines += [line for line in (f"{command} {quoted} a", f"{command} a {quoted}") if refusal(line) is None]
    for program in sorted(tables().any_options):
        for option in help_options(program):
            for line in (f"{program} {option} a", f"{program} a {option}"):
                assert refusal(line) is None, line
                lines.append(line)
    lines = [line for line in lines if shutil.which(line.split()[0])]
    assert len(lines) > 500, len(lines)
    files = {path.name: path.read_bytes() for path in playground.iterdir() if path.is_file()}
    script = "".join(f"{'timeout -k 1 0.5 ' if line.startswith('tail') else ''}{line} </dev/null >/dev/null 2>&1\n"
                     for line in lines)
    (playground.parent / "variants.sh").write_text(script)
    subprocess.run(["bash", "--noprofile", "--norc", str(playground.parent / "variants.sh")], cwd=playground,
                   timeout=600)
    after = {path.name: path.read_bytes() for path in playground.iterdir() if path.is_file()}
    assert after == files, sorted(name for name in after.keys() | files.keys() if after.get(name) != files.get(name))


def help_options(program: str) -> list[str]:
    """The options a GNU program's --help lists, each with a value where it takes one (`--width=./run.sh`)."""
    if not shutil.which(program):
        return []
    text = subprocess.run([program, "--help"], capture_output=True, text=True, stdin=subprocess.DEVNULL).stdout
    options = []
    for name, argument in re.findall(r"(?:^|[\s,])(--?[A-Za-z0-9][\w-]*)(\[?=[A-Z]+\]?| [A-Z]+\b)?", text):
        if name in ("--help", "--version"):
            continue
        options.append(name + ("=" + RUN if argument.startswith(("=", "[=")) else " " + RUN if argument else ""))
    return sorted(set(options))


INSTALLED = [name for name in ("sort", "uniq", "file", "diff") if shutil.which(name)]


@pytest.mark.parametrize("program", INSTALLED)
def test_the_tables_agree_with_the_programs_own_help(program):
    """Each listed option exists, with the arity the table gives it (GNU --help: `--key=KEYDEF`, `--check[=X]`)."""
    text = subprocess.run([program, "--help"], capture_output=True, text=True).stdout
    text = "\n".join(line for line in text.splitlines() if re.match(r"\s+-", line))  # the options' own lines
    table = tables().programs[program].options
    for name, kind in table.items():
        if name.startswith("--"):
            forms = {FLAG if not argument else OPTIONAL if argument.startswith("[") else VALUE for argument in
                     re.findall(re.escape(name) + r"(\[=[^\]]*\]|=\S+| [A-Z]+\b)?(?=[\s,]|$)", text, re.M)}
            assert forms, (program, name)
            written = OPTIONAL if OPTIONAL in forms or forms == {FLAG, VALUE} else forms.pop()
            if name not in ("--context", "--unified"):  # diff lists `-C NUM, --context[=NUM]`
                assert written == kind, (program, name, kind)
        else:
            assert re.search(r"(^|[\s,])" + re.escape(name) + r"\b", text, re.M), (program, name)
            long = re.search(r"(?:^|\s)" + re.escape(name) + r"(?: [A-Z]+)?, (--[\w-]+)", text, re.M)
            if long and long.group(1) in table:  # `-k, --key=KEYDEF`: the short one takes a value too
                assert kind == table[long.group(1)] or table[long.group(1)] == OPTIONAL, (program, name)


def test_the_git_tables_name_options_git_knows(playground):
    unknown = []
    for subcommand, table in tables().git.items():
        for name, kind in table.options.items():
            value = {"--format": "%H", "--pretty": "oneline", "--date": "iso", "-L": "1,1:a", "--group": "author",
                     "--diff-merges": "off", "--ignore-revs-file": "a", "-S": "x"}.get(name, "1")
            words = [name, value] if kind == VALUE else [name]
            target = {"grep": ["-e", "x"], "cat-file": ["-e", "HEAD"], "blame": ["a"], "ls-tree": ["HEAD"],
                      "diff": ["--", "a"]}.get(subcommand, [])
            result = subprocess.run(["git", subcommand, *words, *target], cwd=playground, capture_output=True,
                                    text=True, stdin=subprocess.DEVNULL, timeout=30)
            if re.search(r"unknown (option|switch)|unrecognized argument", result.stderr):
                unknown.append((subcommand, name, result.stderr.splitlines()[:1]))
    assert not unknown, "\n".join(map(str, unknown))
