"""The ACP tests' client side (an editor that records updates and answers permission requests) and the
agent's command line, environment and scripted streamed replies."""

from __future__ import annotations

import asyncio
import json
import os

import acp

from tests.support.fake_server import Streamed, chunks


class Editor:
    """The client side: records every update and answers permission requests from a script."""

    def __init__(self, answers=()):
        self.updates = []
        self.permissions = []
        self.answers = list(answers)
        self.tool_started = asyncio.Event()

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update)
        if update.session_update == "tool_call":
            self.tool_started.set()

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.permissions.append((tool_call, options))
        choice = self.answers.pop(0)
        return acp.schema.RequestPermissionResponse(
            outcome=acp.schema.AllowedOutcome(outcome="selected", option_id=choice))

    def on_connect(self, conn):
        pass

    def of(self, kind):
        return [update for update in self.updates if update.session_update == kind]


def agent_args(server, *flags):
    return ["-m", "codeagent.cli", "acp", "--model", "openai/test-model", "--api-base", server.base,
            "--set", "agent.localize=false", *flags]


def agent_env(tmp_path):
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    return {**env, "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "trajs"),
            "CODEAGENT_CONFIG": str(tmp_path / "no-user-config.yaml")}


def call(name, arguments):
    return (name, [json.dumps(arguments)])


def scripted(number, pieces=(), calls=(), finish="stop"):
    """A streamed reply whose tool calls have ids of their own (c{number}_0...)."""
    out = chunks(pieces, calls, finish)
    for data in out:
        for choice in data["choices"]:
            for tool_call in choice["delta"].get("tool_calls", []):
                if "id" in tool_call:
                    tool_call["id"] = tool_call["id"].replace("call_", f"c{number}_")
    return Streamed(out)
