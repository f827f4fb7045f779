"""The search tool: files by name, and text or regex in a file or a tree, with counts and caps."""

from __future__ import annotations

import shlex

from .base import ToolContext, ToolError, run_in_repo

# Prints the first N matches and, last, "__TOTAL__ <matches> <files>".
_COUNT_AWK = ("awk -F: -v cap={cap} 'NR<=cap {{print}} !($1 in seen) {{seen[$1]=1; files++}} "
              "END {{print \"__TOTAL__\", NR, files+0}}'")


def search(context: ToolContext, command: str, pattern: str, path: str = ".", regex: bool = False,
           include: str | None = None) -> str:
    cap = context.settings.max_listing
    if command == "find_files":
        return _find_files(context, pattern, path, cap)
    if command == "grep":
        return _grep(context, pattern, path, regex, include, cap)
    raise ToolError(f"unknown search command {command!r}; use find_files or grep")


def _find_files(context: ToolContext, pattern: str, path: str, cap: int) -> str:
    glob = pattern if any(ch in pattern for ch in "*?[") else f"*{pattern}*"
    command = (f"find {shlex.quote(path)} -name .git -prune -o -type f -name {shlex.quote(glob)} -print "
               f"| sed 's|^\\./||' | sort | {_COUNT_AWK.format(cap=cap)}")
    lines, total, _ = _run_counted(context, command)
    if total == 0:
        return f"No files matching {glob!r} under {path}."
    more = f"\n[{total - cap} more not shown: narrow the pattern]" if total > cap else ""
    return f"{total} file(s) matching {glob!r} under {path}:\n" + "\n".join(lines) + more


def _grep(context: ToolContext, pattern: str, path: str, regex: bool, include: str | None, cap: int) -> str:
    mode = "-E" if regex else "-F"
    include_flag = f"--include={shlex.quote(include)} " if include else ""
    command = (f"e=$(mktemp); grep -rnI {mode} --exclude-dir=.git {include_flag}-e {shlex.quote(pattern)} -- "
               f"{shlex.quote(path)} 2>\"$e\" | {_COUNT_AWK.format(cap=cap)}; sed 's/^/__ERR__ /' \"$e\"; rm -f \"$e\"")
    lines, total, files = _run_counted(context, command)
    errors = [line[len("__ERR__ "):] for line in lines if line.startswith("__ERR__ ")]
    lines = [line for line in lines if not line.startswith("__ERR__ ")]
    if total == 0:
        if errors:  # grep's own complaint (bad regex, missing path) comes through as is
            raise ToolError("\n".join(errors))
        return f"No matches for {pattern!r} in {path}."
    shown = [line.removeprefix("./") for line in lines]
    shown = [line if len(line) <= 300 else line[:300] + " [...]" for line in shown]
    more = f"\n[{total - cap} more matches not shown: narrow the pattern or the path]" if total > cap else ""
    return f"{total} match(es) in {files} file(s) for {pattern!r} in {path}:\n" + "\n".join(shown) + more


def _run_counted(context: ToolContext, command: str) -> tuple[list[str], int, int]:
    result = run_in_repo(context, command)
    if result.timed_out:
        raise ToolError("the search timed out; search a narrower path")
    lines, total, files = [], 0, 0
    for line in result.output.splitlines():
        if line.startswith("__TOTAL__ "):
            _, total_text, files_text = line.split()
            total, files = int(total_text), int(files_text)
        else:
            lines.append(line)
    return lines, total, files
