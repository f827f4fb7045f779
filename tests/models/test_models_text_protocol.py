import json

import pytest

from codeagent.models.text_protocol import (
    format_tool_call,
    parse_tool_calls,
    render_tools_prompt,
    response_from_text,
    to_text_messages,
)
from tests.support.tools import TOOLS


def test_parses_text_and_calls_in_order():
    reply = (
        "Let me look.\n<tool_call>\n"
        '{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>\n'
        '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
    )
    parsed = parse_tool_calls(reply, tool_names=["bash", "submit"])
    assert parsed.error is None
    assert parsed.content == "Let me look."
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        ("bash", {"command": "ls -la"}),
        ("submit", {}),
    ]
    assert len({c.id for c in parsed.tool_calls}) == 2
    assert json.loads(parsed.tool_calls[0].raw_arguments) == {"command": "ls -la"}


def test_plain_text_is_not_an_error():
    parsed = parse_tool_calls("I think the bug is in utils.py.")
    assert parsed.error is None and parsed.tool_calls == []
    assert parsed.content == "I think the bug is in utils.py."


def test_tolerates_code_fence_inside_the_tag():
    parsed = parse_tool_calls('<tool_call>\n```json\n{"name": "submit", "arguments": {}}\n```\n</tool_call>')
    assert parsed.error is None and parsed.tool_calls[0].name == "submit"


@pytest.mark.parametrize(
    "reply, expected_fragments",
    [
        ('ok\n<tool_call>{"name": "bash", "arguments": {}}', ["unclosed <tool_call>", "line 2, column 1"]),
        ('<tool_call>{"name": "bash"</tool_call>', ["not valid JSON", "Expecting", "char 15"]),
        ('<tool_call>{"arguments": {}}</tool_call>', ['no "name" key', "arguments"]),
        ('<tool_call>{"name": "", "arguments": {}}</tool_call>', ['"name" must be a non-empty string']),
        ('<tool_call>{"name": "bash", "arguments": "ls"}</tool_call>', ['"arguments" must be a JSON object', "str"]),
        ('<tool_call>["bash"]</tool_call>', ["must be a JSON object", "list"]),
        ('<tool_call>"bash"</tool_call>', ["must be a JSON object", "got str"]),
        ("<tool_call>null</tool_call>", ["must be a JSON object", "NoneType"]),
        ("<tool_call>  </tool_call>", ["tool call #1 is empty"]),
        ('text </tool_call> <tool_call>{"name": "x"}</tool_call>', ["without a matching <tool_call>", "line 1, column 6"]),
        ('<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>', ["unknown tool 'rm_rf'", "bash, submit"]),
        ('<function=bash>\n<parameter=command>ls</parameter>\n</function>', ["<function=...>", "<tool_call>"]),
        ('```json\n{"name": "bash", "arguments": {"command": "ls"}}\n```', ["JSON code block"]),
    ],
)
def test_format_errors_are_precise(reply, expected_fragments):
    parsed = parse_tool_calls(reply, tool_names=["bash", "submit"])
    assert parsed.tool_calls == []
    assert parsed.error is not None
    for fragment in expected_fragments:
        assert fragment in parsed.error
    assert parsed.content == reply  # the model's text is kept as written


def test_one_bad_block_rejects_the_whole_reply_and_names_it():
    reply = '<tool_call>{"name": "bash", "arguments": {}}</tool_call>\n<tool_call>{"name": bash}</tool_call>'
    parsed = parse_tool_calls(reply)
    assert parsed.tool_calls == []
    assert "tool call #2" in parsed.error and "line 2, column 1" in parsed.error


def test_max_calls():
    reply = format_tool_call("bash", {"command": "a"}) + format_tool_call("bash", {"command": "b"})
    assert parse_tool_calls(reply, max_calls=2).error is None
    parsed = parse_tool_calls(reply, max_calls=1)
    assert "found 2 tool calls but at most 1 allowed" in parsed.error


def test_format_then_parse_round_trips_even_with_tags_inside_arguments():
    args = {"path": "a.py", "old_str": 'x = "</tool_call>"  # <tool_call>', "new": [1, {"k": None}]}
    reply = "Editing.\n" + format_tool_call("edit", args) + "\n" + format_tool_call("submit", {})
    parsed = parse_tool_calls(reply)
    assert parsed.error is None, parsed.error
    assert parsed.content == "Editing."
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("edit", args), ("submit", {})]


def test_text_after_the_json_object_is_reported():
    parsed = parse_tool_calls('<tool_call>{"name": "bash", "arguments": {}} thanks</tool_call>')
    assert "unexpected text after the JSON object" in parsed.error and "thanks" in parsed.error


def test_empty_reply_is_a_format_error():
    response = response_from_text("   ", ["bash"])
    assert response.format_error and "empty reply" in response.format_error


def test_render_tools_prompt_lists_every_tool_and_the_format():
    prompt = render_tools_prompt(TOOLS)
    assert "<tools>" in prompt and "<tool_call>" in prompt
    for line in prompt.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0].splitlines():
        assert json.loads(line)["name"] in {"bash", "submit"}


def test_to_text_messages_rewrites_tool_calls_and_results():
    messages = [
        {"role": "system", "content": "You fix bugs."},
        {"role": "user", "content": "Fix it."},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}},
                {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": '{"command": "pwd"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "tool", "tool_call_id": "c2", "content": "/repo"},
    ]
    out = to_text_messages(messages, TOOLS)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert out[0]["content"].startswith("You fix bugs.") and "<tools>" in out[0]["content"]
    reparsed = parse_tool_calls(out[2]["content"])
    assert [c.arguments for c in reparsed.tool_calls] == [{"command": "ls"}, {"command": "pwd"}]
    assert out[3]["content"].count("<tool_response>") == 2 and "/repo" in out[3]["content"]
    assert all("tool_calls" not in m and "tool_call_id" not in m for m in out)
