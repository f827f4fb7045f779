"""A small finished trajectory (an edit through bash, a failing test run, submit), for reward tests."""

from __future__ import annotations

import json


def edit_test_submit(patch: str | None = "diff --git a/a.py b/a.py\n"):
    from codeagent.trajectory.schema import Step, ToolCallStats, Trajectory

    def call(call_id, name, arguments):
        return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}

    turns = [("c1", "bash", {"command": "sed -i 's/1/2/' a.py"}, 0),
             ("c2", "bash", {"command": "python -m pytest -q"}, 1),
             ("c3", "submit", {}, None)]
    messages, steps = [], []
    for index, (call_id, name, arguments, exit_code) in enumerate(turns):
        steps.append(Step(index=index, first_message=len(messages), message_count=2,
                          tool_calls=[ToolCallStats(id=call_id, name=name, exit_code=exit_code)]))
        messages += [{"role": "assistant", "content": "", "tool_calls": [call(call_id, name, arguments)]},
                     {"role": "tool", "tool_call_id": call_id, "content": "ok"}]
    return Trajectory(id="t", messages=messages, steps=steps, patch=patch, exit_status="submitted")
