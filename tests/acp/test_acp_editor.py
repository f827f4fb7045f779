"""`codeagent acp` with a client that writes files (the `agent-client-protocol` package's own client over
stdio, a real Docker sandbox, a scripted model): an edit is shown as a diff in the permission request before
it runs, then written to the editor's file through `fs/write_text_file` (codeagent never writes the folder
itself); paths outside the session's folder are never shown or written (issue 35 item 6); `session/load`
replays a saved session in a new process and continues it."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import acp
import pytest

from tests.support.acp import Editor, agent_args, agent_env, call, scripted

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.docker, pytest.mark.timeout(300)]

WRITES = acp.schema.ClientCapabilities(fs=acp.schema.FileSystemCapabilities(read_text_file=True,
                                                                            write_text_file=True))


class WritingEditor(Editor):
    """An editor that takes fs/write_text_file (as Zed does: into the file); allows what it is asked."""

    def __init__(self, answers=()):
        super().__init__(answers)
        self.writes: list[tuple[str, str]] = []

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        if not self.answers:
            self.answers.append("once")
        return await super().request_permission(session_id, tool_call, options, **kwargs)

    async def write_text_file(self, session_id, path, content, **kwargs):
        self.writes.append((path, content))
        with open(path, "w", encoding="utf-8") as file:
            file.write(content)
        return acp.schema.WriteTextFileResponse()


async def spawn(editor, server, tmp_path, body, capabilities=WRITES):
    with open(tmp_path / "agent.err", "ab") as stderr:
        async with acp.spawn_agent_process(editor, sys.executable, *agent_args(server), env=agent_env(tmp_path),
                                           transport_kwargs={"stderr": stderr, "shutdown_timeout": 60},
                                           use_unstable_protocol=True) as (conn, proc):
            init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=capabilities)
            result = await body(conn, init)
        assert await proc.wait() == 0, (tmp_path / "agent.err").read_text()
    return result


def paths_shown(editor) -> list[str]:
    """Every path the agent showed the editor: tool call locations and diffs, in updates and permissions."""
    shown = []
    calls = [update for update in editor.updates if update.session_update in ("tool_call", "tool_call_update")]
    for item in [*calls, *(tool_call for tool_call, _ in editor.permissions)]:
        shown += [location.path for location in getattr(item, "locations", None) or []]
        shown += [content.path for content in getattr(item, "content", None) or [] if content.type == "diff"]
    return [os.path.normpath(path) for path in shown]


def replies(server) -> None:
    server.replies += [
        scripted(1, [], [call("editor", {"command": "str_replace", "path": "/testbed/app.py",
                                         "old_str": "hello", "new_str": "world"})], "tool_calls"),
        scripted(2, [], [call("editor", {"command": "create", "path": "/etc/codeagent-probe", "file_text": "x\n"}),
                         call("editor", {"command": "create", "path": "../../outside.txt", "file_text": "y\n"}),
                         call("editor", {"command": "view", "path": "/etc/passwd"})], "tool_calls"),
        scripted(3, ["Greeting the world now."]),
    ]


async def one_turn(conn, init, repo):
    session = await conn.new_session(cwd=str(repo), mcp_servers=[])
    return await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Greet the world.")])


def test_paths_outside_the_folder_are_never_shown_to_the_editor(server, make_repo, tmp_path):
    """The model's `/etc/...` and `../../x`: no location, no diff, in updates or permission requests."""
    repo = make_repo({"app.py": "print('hello')\n"})
    replies(server)
    editor = WritingEditor()
    no_writes = acp.schema.ClientCapabilities()
    reply = asyncio.run(spawn(editor, server, tmp_path, lambda conn, init: one_turn(conn, init, repo), no_writes))
    assert reply.stop_reason == "end_turn", (tmp_path / "agent.err").read_text()
    shown = paths_shown(editor)
    assert str(repo / "app.py") in shown and all(path.startswith(f"{repo}/") for path in shown), shown
    assert editor.writes == [] and (repo / "app.py").read_text() == "print('hello')\n"  # no fs capability


def test_edits_are_written_through_the_editor_with_the_diff_asked_first(server, make_repo, tmp_path):
    repo = make_repo({"app.py": "print('hello')\n"})
    replies(server)
    editor = WritingEditor()
    reply = asyncio.run(spawn(editor, server, tmp_path, lambda conn, init: one_turn(conn, init, repo)))
    assert reply.stop_reason == "end_turn", (tmp_path / "agent.err").read_text()

    asked, _ = editor.permissions[0]  # the edit's diff is in the question, before it ran
    (diff,) = [content for content in asked.content if content.type == "diff"]
    assert (diff.path, diff.old_text, diff.new_text) == (str(repo / "app.py"), "print('hello')\n", "print('world')\n")
    assert editor.writes == [(str(repo / "app.py"), "print('world')\n")]  # through the editor, once
    assert (repo / "app.py").read_text() == "print('world')\n"
    assert not (tmp_path / "outside.txt").exists() and not (repo.parent.parent / "outside.txt").exists()
    shown = paths_shown(editor)
    assert shown and all(path.startswith(f"{repo}/") for path in shown), shown
    text = "".join(update.content.text for update in editor.of("agent_message_chunk"))
    assert "written through the editor" in text and "git apply" not in text


def test_a_saved_session_is_loaded_in_a_new_process_and_continued(server, make_repo, tmp_path):
    repo = make_repo({"app.py": "print('hello')\n"})
    server.replies += [scripted(1, ["Hello ", "there."]), scripted(2, ["Still here."])]
    first = WritingEditor()

    async def start(conn, init):
        session = await conn.new_session(cwd=str(repo), mcp_servers=[])
        await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Say hello.")])
        return session.session_id

    session_id = asyncio.run(spawn(first, server, tmp_path, start))
    again = WritingEditor()

    async def load(conn, init):
        assert init.agent_capabilities.load_session
        await conn.load_session(cwd=str(repo), session_id=session_id, mcp_servers=[])
        replayed = list(again.updates)
        reply = await conn.prompt(session_id=session_id, prompt=[acp.text_block("Are you there?")])
        return replayed, reply

    replayed, reply = asyncio.run(spawn(again, server, tmp_path, load))
    assert reply.stop_reason == "end_turn", (tmp_path / "agent.err").read_text()
    said = [(update.session_update, update.content.text) for update in replayed]
    assert said == [("user_message_chunk", "Say hello."), ("agent_message_chunk", "Hello there.")]
    sent = json.dumps(server.requests[-1]["body"]["messages"])
    assert "Say hello." in sent and "Hello there." in sent and "Are you there?" in sent  # the same conversation
