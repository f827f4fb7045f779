"""MCP servers (a small server written with the SDK, tests/data/mcp/server.py) give the agent tools
in a real run: over stdio and streamable HTTP, never from an untrusted repository's config, and a
server that does not start is left out with one line."""

from __future__ import annotations

import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from codeagent.agent.loop import Agent
from codeagent.config import Config, load_config
from codeagent.events import EventBus
from codeagent.models import ScriptedModel
from codeagent.run.session.approval import Decision
from codeagent.sandbox import open_sandbox
from codeagent.task import Task
from codeagent.trajectory.store import TrajectoryStore
from tests.support.processes import free_port
from tests.support.scripted import call

pytestmark = pytest.mark.usefixtures("no_leaks")
SERVER = Path(__file__).parent.parent / "data" / "mcp" / "server.py"


def stdio(mode: str = "stdio") -> dict:
    return {"command": sys.executable, "args": [str(SERVER), mode]}


def run(make_repo, tmp_path, config: Config, script: list[dict]):
    repo = make_repo({"README.md": "notes\n"})
    events, warnings = [], []
    model = ScriptedModel(script)
    agent = Agent(model, config, events=EventBus(events.append), store=TrajectoryStore(tmp_path / "trajectories"),
                  warn=warnings.append)
    with open_sandbox(str(repo)) as sandbox:
        result = agent.run(Task(repo=str(repo), problem_statement="shout hello"), sandbox)
    observations = [event.output for event in events if event.kind == "observation"]
    return result, observations, warnings, model, agent


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split(") ")[-1].startswith("Z"))


def test_a_stdio_server_tool_is_called_in_a_real_run_and_its_process_ends_with_the_run(make_repo, tmp_path):
    config = Config(agent={"localize": False, "observation_chars": 2000},
                    mcp={"servers": {"notes": {**stdio(), "env": {"NOTES_TOKEN": "s3cret"}}}, "call_timeout": 3})
    result, observations, warnings, model, agent = run(make_repo, tmp_path, config, [
        call("mcp__notes__shout", text="hello; $(touch /tmp/x)"), call("mcp__notes__slow", seconds=60),
        call("mcp__notes__shout", text="long " * 5000), call("submit")])
    assert result.exit_status == "submitted" and warnings == []
    shouted = re.fullmatch(r"HELLO; \$\(TOUCH /TMP/X\)! \(from pid (\d+)\)", observations[0])
    assert shouted, observations[0]
    assert "did not answer within 3s" in observations[1]  # the call timeout; the run went on
    assert observations[2].startswith("LONG LONG") and len(observations[2]) < 2200  # capped as any observation
    assert "HELLO;" in model.calls[1][-1]["content"]  # the model saw the result as its observation
    saved = TrajectoryStore(tmp_path / "trajectories").load(result.trajectory_id)
    assert "mcp__notes__shout" in [tool["function"]["name"] for tool in saved.tools]
    record = Path(result.trajectory_path).read_text()
    assert "NOTES_TOKEN" in record and "s3cret" not in record  # the server's token stays out of the record
    assert "mcp__notes__shout" not in agent.tools.tools  # gone with the run
    deadline = time.monotonic() + 10
    while alive(int(shouted[1])) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(int(shouted[1])), "the MCP server's process outlived the run"


def test_a_streamable_http_server_on_localhost(make_repo, tmp_path):
    port = free_port()
    server = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        config = Config(agent={"localize": False},
                        mcp={"servers": {"web": {"url": f"http://127.0.0.1:{port}/mcp"}}})
        result, observations, warnings, _, _ = run(make_repo, tmp_path, config, [
            call("mcp__web__shout", text="over http"), call("submit")])
    finally:
        server.terminate()
        server.wait(10)
    assert warnings == [] and result.exit_status == "submitted"
    assert observations[0] == f"OVER HTTP! (from pid {server.pid})"


def test_a_server_that_crashes_at_start_is_left_out_with_one_line_and_the_run_goes_on(make_repo, tmp_path):
    config = Config(agent={"localize": False}, mcp={"servers": {
        "broken": stdio("crash"), "missing": {"command": str(tmp_path / "no-such-program")}, "notes": stdio()}})
    result, observations, warnings, _, _ = run(make_repo, tmp_path, config, [
        call("mcp__notes__shout", text="still here"), call("submit")])
    assert result.exit_status == "submitted" and observations[0].startswith("STILL HERE!")
    assert len(warnings) == 2 and all("\n" not in line for line in warnings)
    broken = next(line for line in warnings if "'broken'" in line)
    assert "left out" in broken and "the notes database is missing" in broken  # the server's own stderr
    assert "'missing' is left out" in next(line for line in warnings if "'missing'" in line)


class _Recorder(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_POST(self):  # noqa: N802
        self.hits.append(self.path)
        self.send_response(500)
        self.end_headers()

    do_GET = do_POST  # noqa: N815

    def log_message(self, *args):
        pass


def test_an_untrusted_repository_config_starts_no_server_and_reaches_no_url(make_repo, tmp_path, monkeypatch):
    monkeypatch.setenv("CODEAGENT_CONFIG", str(tmp_path / "user.yaml"))
    listener = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=listener.serve_forever, daemon=True).start()
    marker = tmp_path / "started"
    repo = make_repo({"README.md": "x\n", ".codeagent.yaml": json.dumps({"mcp": {"servers": {
        "evil": {"command": "sh", "args": ["-c", f"touch {marker}"]},
        "phone": {"url": f"http://127.0.0.1:{listener.server_port}/mcp"}}}})})
    try:
        warnings = []
        config = load_config(repo, warn=warnings.append)
        assert config.mcp.servers == {} and "mcp.servers" in warnings[0]
        events = []
        agent = Agent(ScriptedModel([call("submit")]), config, events=EventBus(events.append),
                      store=TrajectoryStore(tmp_path / "t"), warn=warnings.append)
        with open_sandbox(str(repo)) as sandbox:
            assert agent.run(Task(repo=str(repo), problem_statement="x"), sandbox).exit_status == "submitted"
        assert not marker.exists() and _Recorder.hits == []
        trusted = load_config(repo, trust=True)  # the same file, trusted: the servers are the user's
        assert set(trusted.mcp.servers) == {"evil", "phone"}
    finally:
        listener.shutdown()


def test_tool_names_and_bad_schemas(tmp_path):
    from codeagent.tools.mcp import McpServers

    warnings = []
    servers = McpServers({}, 1, 1, warnings.append)
    listed = [type("T", (), {"name": name, "title": None, "description": "d", "input_schema": schema})()
              for name, schema in [("ok.tool", {"type": "object", "properties": {}}),
                                   ("bad", {"type": "object", "properties": {"a": {"type": 12}}}),
                                   ("array", {"type": "array"}), ("x" * 70, {"type": "object"})]]
    tools = servers._as_tools("my server", listed)
    assert [tool.name for tool in tools] == ["mcp__my_server__ok_tool"]
    assert len(warnings) == 3 and "'bad'" in warnings[0] and "invalid" in warnings[0]


def test_in_a_tui_session_mcp_calls_are_approved_like_commands_and_a_failed_server_is_a_notice(make_repo, tmp_path):
    from codeagent.run.session import Notice, Session

    repo = make_repo({"README.md": "notes\n"})
    config = Config(agent={"localize": False}, trajectories_dir=str(tmp_path / "t"),
                    mcp={"servers": {"notes": stdio(), "broken": stdio("crash")}})
    requests, events = [], []
    model = ScriptedModel([call("mcp__notes__shout", text="a"), call("mcp__notes__shout", text="b"), call("submit"),
                           call("mcp__notes__shout", text="c"), call("submit")])

    def ask(request):
        requests.append(request)
        request.answer(Decision("always"))

    session = Session(config, model, repo=str(repo), mode="auto-edit", store=TrajectoryStore(tmp_path / "t"),
                      ask=ask, emit=events.append)
    try:
        session.submit("shout")  # MCP calls change no file: a TUI session's submit is then empty_submission
        assert session.wait_idle(90) and session.last_status == "empty_submission"
        assert session.submit("once more") == "continued"
        assert session.wait_idle(90) and session.last_status == "empty_submission"
    finally:
        session.close()
    assert [request.title for request in requests] == ["Call the mcp__notes__shout tool?"]  # then always allowed
    assert json.loads(requests[0].body) == {"text": "a"}
    notices = [event for event in events if isinstance(event, Notice) and "'broken' is left out" in event.text]
    assert [notice.level for notice in notices] == ["warning"]  # once: the servers outlive a turn
    pids = {re.search(r"pid (\d+)", event.output)[1] for event in events
            if event.kind == "observation" and event.tool == "mcp__notes__shout"}
    assert len(pids) == 1  # one server process for the whole session...
    assert not alive(int(pids.pop()))  # ...ended with it


def test_an_interrupt_abandons_a_call_in_flight(make_repo, tmp_path):
    repo = make_repo({"README.md": "notes\n"})
    events = []
    agent = None

    def on_event(event):
        events.append(event)
        if event.kind == "tool_called":
            threading.Timer(0.5, agent.interrupt).start()

    agent = Agent(ScriptedModel([call("mcp__notes__slow", seconds=60), call("submit")]),
                  Config(agent={"localize": False}, mcp={"servers": {"notes": stdio()}}),
                  events=EventBus(on_event), store=TrajectoryStore(tmp_path / "t"))
    with open_sandbox(str(repo)) as sandbox:
        result = agent.run(Task(repo=str(repo), problem_statement="wait"), sandbox)
    assert result.exit_status == "interrupted", result.message
    assert [event.output for event in events if event.kind == "observation"] == [
        "Interrupted by the user while it ran."]


def test_a_server_that_never_answers_is_left_out_after_connect_timeout_and_its_process_ended():
    from codeagent.config import McpSettings
    from codeagent.tools.mcp import McpServers

    settings = McpSettings(servers={"mute": {"command": "sleep", "args": ["31.4159"]}}, connect_timeout=1)
    warnings = []
    servers = McpServers(settings.servers, settings.connect_timeout, settings.call_timeout, warnings.append)
    try:
        assert servers.start() == []
    finally:
        servers.close()
    assert warnings == ["warning: MCP server 'mute' is left out: TimeoutError: no answer within 1s"]
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert "sleep 31.4159" not in ps.splitlines()


def test_content_other_than_text_is_summarized():
    import mcp_types as types

    from codeagent.tools.mcp import result_text

    result = types.CallToolResult(content=[
        types.TextContent(type="text", text="plain"),
        types.ImageContent(type="image", data="aGVsbG8gd29ybGQh", mime_type="image/png"),
        types.EmbeddedResource(type="resource", resource=types.TextResourceContents(uri="file:///a.txt", text="inside")),
        types.EmbeddedResource(type="resource", resource=types.BlobResourceContents(
            uri="file:///b.bin", blob="AAAA", mime_type="application/octet-stream")),
        types.ResourceLink(type="resource_link", name="c", uri="https://example.com/c")])
    assert result_text(result).splitlines() == [
        "plain", "[image content: image/png, 12 bytes, not shown]", "inside",
        "[resource file:///b.bin: application/octet-stream, not shown]", "[resource link: https://example.com/c]"]
    assert result_text(types.CallToolResult(content=[], structured_content={"n": 1})) == '{"n": 1}'


def test_eval_workers_rebuild_the_servers_tokens_from_the_config_dump():
    """The dump that `eval run` hands its workers held `<hidden>` for every token: their servers got no key."""
    config = Config(mcp={"servers": {"notes": {**stdio(), "env": {"NOTES_TOKEN": "s3cret"},
                                               "headers": {}}}})
    rebuilt = Config.model_validate(config.model_dump(mode="json"))
    assert rebuilt.mcp.servers["notes"].env == {"NOTES_TOKEN": "s3cret"}
    assert config.recorded()["mcp"]["servers"]["notes"]["env"] == {"NOTES_TOKEN": "<hidden>"}


def test_tokens_in_a_servers_url_and_args_stay_out_of_the_record_and_the_export(make_repo, tmp_path):
    """The server still gets its real arguments; the trajectory and `traj export` show neither token."""
    from click.testing import CliRunner

    from codeagent.cli.traj_commands import traj

    args = [*stdio()["args"], "--api-key", "s3cretA", "--token=s3cretB", "-e", "GH_TOKEN=s3cretC", "--port", "7",
            "--header", "Authorization: Bearer s3cretF", "--upstream=https://bob:s3cretG@mcp.example.com/"]
    config = Config(agent={"localize": False}, mcp={"servers": {
        "notes": {"command": sys.executable, "args": args},
        "web": {"url": "https://bob:s3cretD@mcp.example.com:8443/mcp?api_key=s3cretE&team=blue", "enabled": False}}})
    result, observations, warnings, _, _ = run(make_repo, tmp_path, config, [
        call("mcp__notes__shout", text="hi"), call("submit")])
    assert warnings == [] and observations[0].startswith("HI!")  # the server started with its real args
    record = Path(result.trajectory_path).read_text()
    out = tmp_path / "raw.jsonl"
    exported = CliRunner().invoke(traj, ["--store", str(tmp_path / "trajectories"), "export", "--format", "jsonl",
                                         "--output", str(out)])
    assert exported.exit_code == 0, exported.output
    header = json.loads(record.splitlines()[0])
    for text, first in ((record, header.get("trajectory", header)), (out.read_text(), json.loads(out.read_text()))):
        assert not re.search(r"s3cret[A-G]", text)
        saved = first["config"]["mcp"]["servers"]
        assert saved["notes"]["args"][-10:] == [
            "--api-key", "<hidden>", "--token=<hidden>", "-e", "GH_TOKEN=<hidden>", "--port", "7",
            "--header", "Authorization: <hidden>", "--upstream=https://bob:<hidden>@mcp.example.com/"]
        assert saved["web"]["url"] == "https://bob:<hidden>@mcp.example.com:8443/mcp?api_key=<hidden>&team=blue"


def test_a_servers_resources_are_read_by_the_model_through_a_read_only_tool(make_repo, tmp_path):
    config = Config(agent={"localize": False}, mcp={"servers": {"notes": stdio()}})
    result, observations, warnings, model, _ = run(make_repo, tmp_path, config, [
        call("mcp__notes__read_resource", uri="notes://today"), call("mcp__notes__read_resource", uri="notes://logo.png"),
        call("mcp__notes__read_resource", uri="notes://missing"), call("submit")])
    assert result.exit_status == "submitted" and warnings == []
    assert observations[0] == "buy milk; call Ada"
    assert "buy milk; call Ada" in model.calls[1][-1]["content"]  # what the model received
    assert observations[1] == "[resource notes://logo.png: image/png, not shown]"  # binary: one line
    assert "Reading notes://missing from 'notes' failed" in observations[2]
    saved = TrajectoryStore(tmp_path / "trajectories").load(result.trajectory_id)
    tool = next(tool["function"] for tool in saved.tools if tool["function"]["name"] == "mcp__notes__read_resource")
    assert "- notes://today (text/plain): Today's notes" in tool["description"]
    assert "- notes://logo.png (image/png): The logo" in tool["description"]


def test_the_read_resource_tool_is_read_only_and_a_prompt_is_listed(tmp_path):
    from codeagent.tools.mcp import mcp_tools
    from codeagent.tools.registry import ToolRegistry

    registry, warnings = ToolRegistry(["submit"]), []
    with mcp_tools(registry, Config(mcp={"servers": {"notes": stdio()}}).mcp, warnings.append) as servers:
        assert registry.read_only("mcp__notes__read_resource") and not registry.read_only("mcp__notes__shout")
        assert servers.prompt_commands() == [("mcp__notes__review", "topic [style]", "[notes] Ask for a review of a topic.")]
        assert servers.render_prompt("mcp__notes__review", "parser terse").startswith("Review parser in a terse style.")
        assert servers.render_prompt("MCP__notes__review", "style=long 'the lexer'").startswith(
            "Review the lexer in a long style.")
        assert servers.render_prompt("mcp__notes__review", "the whole parser").startswith(
            "Review the in a whole parser style.")  # the last argument takes the rest of the words
        with pytest.raises(ValueError, match="missing argument"):
            servers.render_prompt("mcp__notes__review", "style=long")
    assert warnings == []


def test_a_prompt_is_a_slash_command_in_the_tui_and_its_rendered_text_is_what_the_model_receives(make_repo, tmp_path):
    from codeagent.run.session import Notice, Session
    from codeagent.run.session.slash import help_text

    repo = make_repo({"README.md": "notes\n"})
    config = Config(agent={"localize": False}, trajectories_dir=str(tmp_path / "t"),
                    mcp={"servers": {"notes": stdio()}})
    model, events = ScriptedModel([call("submit")]), []
    session = Session(config, model, repo=str(repo), mode="full-auto", store=TrajectoryStore(tmp_path / "t"),
                      emit=events.append)
    try:
        waited = time.monotonic() + 60
        while not session.mcp_prompts() and time.monotonic() < waited:  # the servers start with the session
            time.sleep(0.1)
        listed = " ".join(help_text(session.mcp_prompts()).split())  # one line, or usage and text on two
        assert "/mcp__notes__review topic [style] [notes] Ask for a review of a topic." in listed
        assert session.send_prompt("mcp__notes__review") == "started"  # a required argument is missing
        assert session.wait_idle(60) and session.task is None
        assert session.send_prompt("mcp__notes__review", "'the parser' style=terse") == "started"
        assert session.wait_idle(90)
    finally:
        session.close()
    notices = [event.text for event in events if isinstance(event, Notice)]
    assert any("/mcp__notes__review: missing argument(s): topic" in text for text in notices)
    first = [message["content"] for message in model.calls[0] if message["role"] == "user"]
    assert any("Review the parser in a terse style. (rendered by pid" in text for text in first)
    assert session.task.problem_statement.startswith("Review the parser in a terse style.")


def test_in_the_tui_help_lists_a_prompt_and_typing_it_sends_the_rendered_text(make_repo, tmp_path):
    import asyncio

    from codeagent.run.session import Session
    from codeagent.tui.app import CodeagentApp
    from tests.support.tui import quit_app, screen_text, send, until

    repo = make_repo({"README.md": "notes\n"})
    model = ScriptedModel([call("submit")])
    session = Session(Config(agent={"localize": False}, mcp={"servers": {"notes": stdio()}}), model, repo=str(repo),
                      mode="full-auto", store=TrajectoryStore(tmp_path / "t"))
    app = CodeagentApp(session)

    async def drive():
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, session.mcp_prompts, timeout=60, what="the MCP server's prompts")
            await send(pilot, "/help")
            await pilot.pause(0.1)
            assert "/mcp__notes__review topic [style]" in screen_text(app)
            await send(pilot, "/mcp__notes__review parser")
            await until(pilot, lambda: session.last_status == "empty_submission" and not session.busy, timeout=90,
                        what="the run the prompt started")
            assert "› /mcp__notes__review parser" in screen_text(app)
            await quit_app(pilot, session)

    asyncio.run(drive())
    first = [message["content"] for message in model.calls[0] if message["role"] == "user"]
    assert any("Review parser in a short style." in text for text in first)
