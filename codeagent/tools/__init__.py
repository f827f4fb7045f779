"""The agent's tools: specs are data (tools/*.yaml at the top of the repository), each with a function
over a ToolContext (the sandbox, the settings, the issue, per-run state).

    base.py            Tool, ToolContext, ToolResult, ToolError: what a tool is (re-exported here)
    registry.py        load the specs and run calls against them
    bash.py            one command in the sandbox's persistent shell
    editor.py          view, create, str_replace, insert, undo_edit; edit_history.py keeps the undo
    search.py          files by name, text or regex in files, with counts and caps
    navigate.py        outline, definitions, references, repo map, localization (tree-sitter over mirror.py,
                       the sandbox's repository as files on this machine)
    submit.py          the agent says it is done
    subagent.py        hand a sub-task to a subagent (agent/subagents.py does the work)
    skill.py           skills (SKILL.md folders) and the `skill` tool
    web_fetch.py       the host fetches a page from an allow-listed host (opt-in)
    mcp.py             MCP servers' tools beside the built-in ones
    read_only_commands.py shell_words.py   which shell commands plan mode runs: reading ones, word by word
    option_words.py    a command's options read as its own parser reads them, against tools/read_only/
    text.py            text helpers shared by tools and prompt rendering
"""

from .base import Tool, ToolContext, ToolError, ToolResult

__all__ = ["Tool", "ToolContext", "ToolError", "ToolResult"]
