"""The file editor: view, create, str_replace, insert, undo_edit — on text files in the sandbox."""

from __future__ import annotations

import errno

from .base import ToolContext, ToolError, ToolResult, run_in_repo
from .edit_history import EditHistory, file_key
from .text import numbered, truncate_middle

SNIPPET_CONTEXT = 4
MAX_FILE_BYTES = 16 * 1024 * 1024  # larger files are not pulled into this process


def edit_file(context: ToolContext, command: str, path: str, file_text: str | None = None,
              old_str: str | None = None, new_str: str | None = None, insert_line: int | None = None,
              view_range: list[int] | None = None) -> ToolResult | str:
    if command == "view":
        return _view(context, path, view_range)
    if command == "create":
        return _create(context, path, _required(file_text, "file_text", command))
    if command == "str_replace":
        return _str_replace(context, path, _required(old_str, "old_str", command), new_str or "")
    if command == "insert":
        return _insert(context, path, _required(insert_line, "insert_line", command), _required(new_str, "new_str", command))
    if command == "undo_edit":
        return _undo(context, path)
    raise ToolError(f"unknown editor command {command!r}; use view, create, str_replace, insert or undo_edit")


def _required(value, name: str, command: str):
    if value is None:
        raise ToolError(f"`{command}` needs the `{name}` argument")
    return value


def _read_text(context: ToolContext, path: str) -> str:
    try:
        data = context.sandbox.read_file(path, max_bytes=MAX_FILE_BYTES)
    except FileNotFoundError:
        raise ToolError(f"{path} does not exist. Use `view` on a directory to see what is there, "
                        "or `create` to make a new file.") from None
    except IsADirectoryError:
        raise ToolError(f"{path} is a directory; the editor edits files") from None
    except OSError as exc:
        if exc.errno != errno.EFBIG:
            raise
        raise ToolError(f"{exc.strerror}: too large for the editor; use bash (head, sed -n, grep -n) "
                        "to look at parts of it") from None
    if b"\0" in data[:8192]:
        raise ToolError(f"{path} is a binary file; the editor works on text files only")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(f"{path} is not valid UTF-8 text ({exc.reason} at byte {exc.start}); "
                        "the editor works on UTF-8 text files only") from None


def edit_history(context: ToolContext) -> EditHistory:
    return context.state.setdefault("edit_history", EditHistory())


def _write_text(context: ToolContext, path: str, text: str, previous: str | None) -> None:
    edit_history(context).push(file_key(context.sandbox.workdir, path),
                               None if previous is None else previous.encode("utf-8"))
    context.sandbox.write_file(path, text.encode("utf-8"))


def _snippet(text: str, first_changed: int, changed_lines: int) -> str:
    lines = text.split("\n")
    start = max(1, first_changed - SNIPPET_CONTEXT)
    end = min(len(lines), first_changed + changed_lines - 1 + SNIPPET_CONTEXT)
    return numbered(lines[start - 1:end], start)


def _view(context: ToolContext, path: str, view_range: list[int] | None) -> str:
    entries = None
    try:
        entries = context.sandbox.list_dir(path)
    except NotADirectoryError:
        pass
    if entries is not None:
        if view_range:
            raise ToolError("`view_range` applies to files, not directories")
        return _directory_listing(context, path)
    text = _read_text(context, path)
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    if not view_range:
        return truncate_middle(numbered(lines), context.settings.observation_chars) if lines else f"{path} is empty"
    if len(view_range) != 2:
        raise ToolError("`view_range` is [first_line, last_line] (1-based; last_line -1 means the end)")
    first, last = view_range
    last = len(lines) if last == -1 else last
    if not 1 <= first <= max(len(lines), 1) or last < first:
        raise ToolError(f"`view_range` {view_range} is outside the file, which has {len(lines)} lines")
    return truncate_middle(numbered(lines[first - 1:last], first), context.settings.observation_chars)


def _directory_listing(context: ToolContext, path: str) -> str:
    target = path.rstrip("/") or "."
    command = (f"cd {_quote(target)} && find . -mindepth 1 -maxdepth 2 -not -path '*/.*' "
               f"-not -path '*/__pycache__*' | sort | head -n {context.settings.max_listing + 1}")
    result = run_in_repo(context, command, timeout=60)
    lines = [line[2:] for line in result.output.splitlines() if line.startswith("./")]
    capped = len(lines) > context.settings.max_listing
    body = "\n".join(lines[: context.settings.max_listing])
    note = f"\n[listing capped at {context.settings.max_listing} entries]" if capped else ""
    return f"Files and directories in {path} (2 levels, hidden ones left out):\n{body}{note}"


def _create(context: ToolContext, path: str, file_text: str) -> str:
    try:
        context.sandbox.read_file(path, max_bytes=0)  # only whether it exists
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        raise ToolError(f"{path} is a directory") from None
    except OSError as exc:
        if exc.errno != errno.EFBIG:
            raise
        raise ToolError(f"{path} already exists; use `str_replace` to change it (or `view` it first)") from None
    else:
        raise ToolError(f"{path} already exists; use `str_replace` to change it (or `view` it first)")
    _write_text(context, path, file_text, None)
    return f"Created {path} ({len(file_text.splitlines())} lines)."


def _str_replace(context: ToolContext, path: str, old_str: str, new_str: str) -> str:
    text = _read_text(context, path)
    if old_str == "":
        raise ToolError("`old_str` is empty; give the exact text to replace (use `insert` to add lines)")
    count = text.count(old_str)
    if count == 0:
        hint = ""
        if old_str.strip() and text.count(old_str.strip()) >= 1:
            hint = " The text occurs with different surrounding whitespace: copy it exactly, indentation included."
        raise ToolError(f"No replacement made: `old_str` does not occur in {path}.{hint}")
    if count > 1:
        starts, position = [], text.find(old_str)
        while position >= 0:
            starts.append(text.count("\n", 0, position) + 1)
            position = text.find(old_str, position + 1)
        raise ToolError(f"No replacement made: `old_str` occurs {count} times in {path} (at lines "
                        f"{', '.join(map(str, starts))}). Include more surrounding lines to make it unique.")
    first_line = text[: text.find(old_str)].count("\n") + 1
    updated = text.replace(old_str, new_str, 1)
    _write_text(context, path, updated, text)
    return (f"Edited {path}. The changed region, with line numbers:\n"
            f"{_snippet(updated, first_line, new_str.count(chr(10)) + 1)}\n"
            "Check that it is what you meant; `undo_edit` reverts it.")


def _insert(context: ToolContext, path: str, insert_line: int, new_str: str) -> str:
    text = _read_text(context, path)
    lines = text.split("\n")
    had_final_newline = text.endswith("\n")
    if had_final_newline:
        lines.pop()
    if not 0 <= insert_line <= len(lines):
        raise ToolError(f"`insert_line` {insert_line} is outside the file: use 0 (top) to {len(lines)} (end)")
    new_lines = new_str.split("\n")
    if new_str.endswith("\n"):
        new_lines.pop()
    updated_lines = lines[:insert_line] + new_lines + lines[insert_line:]
    updated = "\n".join(updated_lines) + ("\n" if had_final_newline or not text else "")
    _write_text(context, path, updated, text)
    return (f"Inserted {len(new_lines)} line(s) after line {insert_line} of {path}:\n"
            f"{_snippet(updated, insert_line + 1, len(new_lines))}")


def _undo(context: ToolContext, path: str) -> str:
    history, key = edit_history(context), file_key(context.sandbox.workdir, path)
    held, previous = history.pop(key)
    if not held:
        if history.was_cut(key):
            raise ToolError(f"there is no edit of {path} left to undo: its older versions were dropped (the editor "
                            f"keeps {history.max_per_file} versions of a file and {history.max_bytes // 2**20} MiB "
                            "in all). `git diff` shows what changed; `git checkout -- FILE` restores the original.")
        raise ToolError(f"there is no edit of {path} to undo")
    if previous is None:  # the file was created by the editor: undo removes it
        result = run_in_repo(context, f"rm -f -- {_quote(path)}", timeout=30)
        if result.exit_code != 0:
            raise ToolError(f"could not remove {path}: {result.output.strip()}")
        return f"Undid the creation of {path} (removed it)."
    context.sandbox.write_file(path, previous)
    return f"Reverted the last edit of {path}."


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def plan_check(arguments: dict) -> str | None:
    """Plan mode lets the editor view, never write."""
    command = arguments.get("command")
    if command == "view":
        return None
    return f"the editor only views files in plan mode (`{command}` writes)."
