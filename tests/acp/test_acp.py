"""`codeagent acp` through the real CLI, driven by the ACP package's own client over stdio: initialize, a
session on a small git repository (a real Docker sandbox), prompt turns with a scripted streaming model
(message chunks, tool calls with their status, the edit's diff), permission requests answered by the
client (reject, then allow once), and cancel during a long command. The user's repository is never written."""

from __future__ import annotations

import asyncio
import json
import sys

import acp
import pytest

from tests.support.acp import Editor, agent_args, agent_env, call, scripted
from tests.support.git import git

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.docker, pytest.mark.timeout(300)]


def containers_of(pid):
    """The sandbox containers the agent process (pid) owns."""
    import socket

    from codeagent.sandbox.docker import LABEL
    from codeagent.sandbox.engine import docker_client

    owner = f"{socket.gethostname()}:{pid}"
    return [c for c in docker_client().containers.list(all=True, filters={"label": LABEL}, ignore_removed=True)
            if c.labels.get("codeagent.owner") == owner]


async def drive(server, tmp_path, editor, flags, body):
    with open(tmp_path / "agent.err", "wb") as stderr:
        async with acp.spawn_agent_process(editor, sys.executable, *agent_args(server, *flags), env=agent_env(tmp_path),
                                           transport_kwargs={"stderr": stderr, "shutdown_timeout": 60},
                                           use_unstable_protocol=True) as (conn, proc):
            init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            assert init.agent_info.name == "codeagent" and init.protocol_version == acp.PROTOCOL_VERSION
            conn.pid = proc.pid
            result = await body(conn)
        assert await proc.wait() == 0, (tmp_path / "agent.err").read_text()
    return result


def test_a_prompt_turn_streams_text_tool_calls_and_a_diff_and_asks_the_editor(server, make_repo, tmp_path):
    repo = make_repo({"app.py": "print('hello')\n"})
    (tmp_path / "no-user-config.yaml").write_text("agent:\n  write_through: true\n")  # even so: not written
    server.replies += [
        scripted(1, ["Let me ", "look."], [call("bash", {"command": "awk 1 app.py"})], "tool_calls"),
        scripted(2, ["Again."], [call("bash", {"command": "awk 1 app.py"})], "tool_calls"),
        scripted(3, [], [call("editor", {"command": "str_replace", "path": "/testbed/app.py",
                                      "old_str": "hello", "new_str": "world"})], "tool_calls"),
        scripted(4, ["Done: it ", "greets the world."]),
        scripted(5, [], [call("bash", {"command": "awk 1 app.py"})], "tool_calls"),
        scripted(6, ["You are welcome."]),
    ]
    editor = Editor(answers=["reject", "always", "once"])

    async def body(conn):
        session = await conn.new_session(cwd=str(repo), mcp_servers=[])
        assert session.modes.current_mode_id == "suggest"
        reply = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Greet the world.")])
        count = len(editor.updates)
        follow_up = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Thanks.")])
        assert follow_up.stop_reason == "end_turn"
        later = "".join(u.content.text for u in editor.updates[count:] if u.session_update == "agent_message_chunk")
        assert "You are welcome." in later  # the same session goes on
        assert len(editor.permissions) == 3  # `awk` was allowed always: not asked again (a read-only `cat` is never asked)
        return reply

    reply = asyncio.run(drive(server, tmp_path, editor, [], body))
    assert reply.stop_reason == "end_turn", (tmp_path / "agent.err").read_text()

    text = "".join(update.content.text for update in editor.of("agent_message_chunk"))
    assert "Let me look." in text and "Done: it greets the world." in text
    started = {update.tool_call_id: update for update in editor.of("tool_call")}
    assert [(u.kind, u.status) for u in started.values()] == [("execute", "pending")] * 2 + [("edit", "pending"),
                                                                                          ("execute", "pending")]
    progress = {}
    for update in editor.of("tool_call_update"):
        progress.setdefault(update.tool_call_id, []).append(update)
    first, second, edit, again = started
    assert [u.status for u in progress[first]] == ["failed"]  # rejected: it never ran
    assert [u.status for u in progress[second]] == ["in_progress", "completed"]
    assert "print('hello')" in progress[second][-1].content[0].content.text
    assert [u.status for u in progress[again]] == ["completed"] and "world" in progress[again][-1].content[0].content.text
    diffs = [c for c in progress[edit][-1].content if c.type == "diff"]
    assert progress[edit][-1].status == "completed" and len(diffs) == 1
    assert diffs[0].path == str(repo / "app.py")
    assert diffs[0].old_text == "print('hello')\n" and diffs[0].new_text == "print('world')\n"

    # each approval codeagent asks is a permission request about that tool call, with its options
    assert [tool_call.tool_call_id for tool_call, _ in editor.permissions] == [first, second, edit]
    kinds = [option.kind for option in editor.permissions[0][1]]
    assert kinds == ["allow_once", "allow_always", "reject_once"]
    rejected = json.dumps(server.requests[1]["body"]["messages"])
    assert "reject" in rejected.lower()  # the model was told its command was not run

    patch_file = text.rsplit("`git apply ", 1)[1].split("`")[0]  # the change is handed over, not written
    assert "+print('world')" in open(patch_file).read()
    assert (repo / "app.py").read_text() == "print('hello')\n"  # the sandbox changed, not the user's files
    assert git(repo, "status", "--porcelain") == ""


def test_cancel_ends_a_long_command_with_the_cancelled_stop_reason(server, make_repo, tmp_path):
    repo = make_repo({"app.py": "print('hello')\n"})
    server.replies += [scripted(1, ["Waiting."], [call("bash", {"command": "sleep 300"})], "tool_calls")]
    editor = Editor()

    async def body(conn):
        session = await conn.new_session(cwd=str(repo), mcp_servers=[])
        turn = asyncio.ensure_future(conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Wait.")]))
        await asyncio.wait_for(editor.tool_started.wait(), 120)
        await asyncio.sleep(1)  # the command is running in the sandbox
        await conn.cancel(session_id=session.session_id)
        reply = await asyncio.wait_for(turn, 60)
        assert len(containers_of(conn.pid)) == 1  # the session keeps its sandbox after a cancelled turn
        await conn.close_session(session_id=session.session_id)
        assert containers_of(conn.pid) == []  # closing the session removed it, the process still running
        return reply

    reply = asyncio.run(drive(server, tmp_path, editor, ["--approval-mode", "full-auto"], body))
    assert reply.stop_reason == "cancelled"
    assert editor.permissions == []  # full-auto asks nothing
    (sleeping,) = editor.of("tool_call")
    assert [u.status for u in editor.of("tool_call_update") if u.tool_call_id == sleeping.tool_call_id] == ["failed"]
    assert git(repo, "status", "--porcelain") == ""


def test_the_mode_picker_and_a_limit_that_ends_the_turn_with_max_turn_requests(server, make_repo, tmp_path):
    repo = make_repo({"app.py": "print('hello')\n"})
    server.replies += [scripted(1, ["Looking."], [call("bash", {"command": "ls"})], "tool_calls")]
    editor = Editor()

    async def body(conn):
        session = await conn.new_session(cwd=str(repo), mcp_servers=[])
        await conn.set_session_mode(session_id=session.session_id, mode_id="full-auto")  # the editor's mode picker
        return await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Look.")])

    reply = asyncio.run(drive(server, tmp_path, editor, ["--set", "limits.max_steps=1"], body))
    assert reply.stop_reason == "max_turn_requests"
    assert editor.permissions == [] and [u.status for u in editor.of("tool_call_update")] == ["completed"]


def test_the_prompt_text_carries_attached_files():
    from codeagent.acp.server import prompt_text

    blocks = [acp.text_block("Fix it."), acp.resource_block(acp.embedded_text_resource("file:///r/a.py", "x = 1\n")),
              acp.resource_link_block("b.py", "file:///r/b.py")]
    assert prompt_text(blocks) == "Fix it.\n\nAttached file:///r/a.py:\n```\nx = 1\n```\n\n(attached: file:///r/b.py)"


def test_a_session_on_a_missing_folder_or_without_a_model_is_refused_with_the_reason(server, tmp_path):
    editor = Editor()

    async def missing(conn):
        with pytest.raises(acp.RequestError) as refused:
            await conn.new_session(cwd=str(tmp_path / "typo"), mcp_servers=[])
        return refused.value

    assert "not an absolute path to a folder" in str(asyncio.run(drive(server, tmp_path, editor, [], missing)).data)

    async def no_model(conn):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        with pytest.raises(acp.RequestError) as refused:
            await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        return refused.value

    async def run():
        with open(tmp_path / "agent.err", "wb") as stderr:
            async with acp.spawn_agent_process(editor, sys.executable, "-m", "codeagent.cli", "acp",
                                               env=agent_env(tmp_path), transport_kwargs={"stderr": stderr}) as (conn, _):
                return await no_model(conn)

    assert "no model configured" in str(asyncio.run(run()).data)
