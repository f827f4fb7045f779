"""The shape of a chat completion request to `codeagent serve`, checked before the model sees it.

Fields OpenAI clients send that this server does not use (model, user, ...) are allowed and ignored;
fields it uses must have the right type and range, so that a bad request is a 400 with the reason.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)

MAX_MESSAGES = 4096
MAX_TOOLS = 256


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Function(_Open):
    name: StrictStr
    arguments: StrictStr | dict[str, Any] = "{}"


class _ToolCall(_Open):
    id: StrictStr | None = None
    type: Literal["function"] = "function"
    function: _Function


class _Part(_Open):
    type: StrictStr
    text: StrictStr | None = None


class _Message(_Open):
    role: Literal["system", "user", "assistant", "tool"]
    content: StrictStr | list[_Part] | None = None
    tool_calls: list[_ToolCall] | None = None
    tool_call_id: StrictStr | None = None
    name: StrictStr | None = None


class _ToolFunction(_Open):
    name: StrictStr
    description: StrictStr | None = None
    parameters: dict[str, Any] | None = None


class _Tool(_Open):
    type: Literal["function"] = "function"
    function: _ToolFunction


_Tokens = Annotated[StrictInt, Field(ge=1)]


class ChatRequest(_Open):
    messages: list[_Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    tools: list[_Tool] | None = Field(default=None, max_length=MAX_TOOLS)
    tool_choice: StrictStr | dict[str, Any] | None = None
    temperature: Annotated[float, Field(ge=0, le=2, allow_inf_nan=False)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] | None = None
    max_tokens: _Tokens | None = None
    max_completion_tokens: _Tokens | None = None
    seed: StrictInt | None = None
    stop: StrictStr | Annotated[list[StrictStr], Field(max_length=16)] | None = None
    stream: StrictBool | None = None
    logprobs: StrictBool | None = None
    return_tokens_as_token_ids: StrictBool | None = None
    return_token_ids: StrictBool | None = None
    n: Literal[1] | None = None


def validate_request(body: Any) -> ChatRequest:
    """The request, or ValueError with a one-line reason naming the bad fields."""
    if not isinstance(body, dict):
        raise ValueError("the request body must be a JSON object")
    try:
        return ChatRequest.model_validate(body)
    except ValidationError as error:
        problems = error.errors(include_url=False, include_input=False)
        reasons = [f"{'.'.join(str(part) for part in problem['loc']) or 'body'}: {problem['msg']}"
                   for problem in problems[:5]]
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise ValueError("invalid request: " + "; ".join(reasons) + more) from None
