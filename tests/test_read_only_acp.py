"""The attack of issue 35 end to end: `codeagent acp --approval-mode suggest --sandbox local` (commands run on this
machine), an editor that rejects every permission request, and a model that writes and runs through options
of the "read-only" commands, spelt so that a check by full names misses them (abbreviated, clustered, `=value`,
behind a glob that the shell expands into an option). Each one is asked about (and so never runs); no file is
written and no command runs on the host; a read-only command still runs without asking."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import acp
import pytest

from tests.support.fake_server import Streamed, chunks
from tests.support.git import git

pytestmark = pytest.mark.timeout(300)


class RejectingEditor:
    def __init__(self):
        self.updates, self.permissions = [], []

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update)

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.permissions.append(tool_call)
        reject = next(option.option_id for option in options if option.kind == "reject_once")
        return acp.schema.RequestPermissionResponse(outcome=acp.schema.AllowedOutcome(outcome="selected",
                                                                                      option_id=reject))

    def on_connect(self, conn):
        pass


def reply(number, calls=(), text=()):
    out = chunks(text, [(name, [json.dumps(arguments)]) for name, arguments in calls],
                 "tool_calls" if calls else "stop")
    for data in out:
        for choice in data["choices"]:
            for tool_call in choice["delta"].get("tool_calls", []):
                if "id" in tool_call:
                    tool_call["id"] = tool_call["id"].replace("call_", f"c{number}_")
    return Streamed(out)


def test_read_only_options_that_write_or_run_are_asked_about_and_never_run_on_the_host(server, make_repo, tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    (host / "magic").write_text("0\tstring\tHELLO\thello\n")
    lines = "".join(f"touch {host}/ran_sort\n" for _ in range(400))  # sort's temporaries go through `sh`
    repo = make_repo({"app.py": "print('hello')\n", "lines.txt": lines, "--compress-program=sh": lines})
    attacks = [f"sort --outp={host}/written app.py",
               "sort -S 1K --compress-prog=sh lines.txt",
               f"git grep --open-files-in-pager='touch {host}/ran_git;' print",
               f"git grep --open='touch {host}/ran_git_short;' print",
               f"git grep -nO'touch {host}/ran_git_cluster;' print",
               f"file --comp -m {host}/magic",
               f"sort -ro{host}/written_cluster app.py",
               "sort -S 1K *"]  # `*` expands to `--compress-program=sh lines.txt`
    server.replies += [reply(n, [("bash", {"command": command})]) for n, command in enumerate(attacks)]
    server.replies += [reply(90, [("bash", {"command": "ls -a"})]), reply(91, text=["Done."])]
    editor = RejectingEditor()
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    env.update(CODEAGENT_TRAJECTORY_DIR=str(tmp_path / "trajs"), CODEAGENT_CONFIG=str(tmp_path / "none.yaml"))
    args = ["-m", "codeagent.cli", "acp", "--model", "openai/test-model", "--api-base", server.base,
            "--set", "agent.localize=false", "--approval-mode", "suggest", "--sandbox", "local"]

    async def run():
        with open(tmp_path / "agent.err", "wb") as stderr:
            async with acp.spawn_agent_process(editor, sys.executable, *args, env=env,
                                               transport_kwargs={"stderr": stderr, "shutdown_timeout": 60},
                                               use_unstable_protocol=True) as (conn, proc):
                await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
                session = await conn.new_session(cwd=str(repo), mcp_servers=[])
                answer = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("Look around.")])
            assert await proc.wait() == 0
        return answer

    answer = asyncio.run(run())
    assert answer.stop_reason == "end_turn", (tmp_path / "agent.err").read_text()
    started = [update for update in editor.updates if update.session_update == "tool_call"]
    assert len(started) == len(attacks) + 1
    assert [call.tool_call_id for call in editor.permissions] == [call.tool_call_id for call in started[:-1]]
    updates = [update for update in editor.updates if update.session_update == "tool_call_update"]
    for call in started[:-1]:
        assert [u.status for u in updates if u.tool_call_id == call.tool_call_id] == ["failed"]
    listing = [u for u in updates if u.tool_call_id == started[-1].tool_call_id][-1]
    assert listing.status == "completed"  # `ls -a` is read-only: it ran without asking
    listed = listing.content[0].content.text.split()
    assert "app.py" in listed and "magic.mgc" not in listed  # nothing written in the sandbox's copy either
    assert sorted(os.listdir(host)) == ["magic"]  # no file written, no command run on the host
    assert git(repo, "status", "--porcelain") == ""
