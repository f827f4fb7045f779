"""Training sequences from trajectories, with a mask that is 1 exactly on what the model wrote.

Token-exact (from recorded ids): a run's first step gives the prompt; each step's completion ids
follow as generated; the tokens between one step's completion and the next step's prompt are the
observations (tool results, user turns, template glue), masked out. This needs every step's
`prompt_token_ids` to extend the previous prompt + completion, which the local backend guarantees
for an untouched history.

Rendered (from messages, for runs of hosted models that record no ids): the tokenizer's chat template
renders the conversation and its `{% generation %}` markers give the assistant tokens.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..models.hf import template_messages
from . import TrainError


@dataclass
class TokenSequence:
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)  # per completion token: 1 generated, 0 observation
    logprobs: list[float] = field(default_factory=list)  # per completion token (0.0 for observations)
    truncated_steps: int = 0  # steps whose reply was cut at max_tokens

    @property
    def input_ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    @property
    def assistant_mask(self) -> list[int]:
        return [0] * len(self.prompt_ids) + self.mask

    def __len__(self) -> int:
        return len(self.prompt_ids) + len(self.completion_ids)


class NotTokenExact(ValueError):
    """The recorded steps cannot be chained into one sequence; the message says where."""


def chain_steps(steps: list[Any]) -> TokenSequence:
    """One sequence from recorded steps (objects or dicts with prompt_token_ids/token_ids/logprobs)."""
    def get(step, name):
        return step.get(name) if isinstance(step, dict) else getattr(step, name, None)

    if not steps:
        raise NotTokenExact("the trajectory has no steps")
    sequence: TokenSequence | None = None
    for index, step in enumerate(steps):
        prompt, completion = get(step, "prompt_token_ids"), get(step, "token_ids")
        if not prompt or completion is None:
            raise NotTokenExact(f"step {index} recorded no token ids (the model backend gives none)")
        logprobs = get(step, "logprobs") or [0.0] * len(completion)
        if len(logprobs) != len(completion):
            raise NotTokenExact(f"step {index}: {len(logprobs)} logprobs for {len(completion)} tokens")
        if sequence is None:
            sequence = TokenSequence(list(prompt))
        else:
            so_far = sequence.input_ids
            if prompt[: len(so_far)] != so_far:
                raise NotTokenExact(
                    f"step {index}'s prompt does not extend the previous prompt and completion (the history "
                    "was rewritten, e.g. elided to fit the context)"
                )
            observation = list(prompt[len(so_far):])
            sequence.completion_ids += observation
            sequence.mask += [0] * len(observation)
            sequence.logprobs += [0.0] * len(observation)
        sequence.completion_ids += list(completion)
        sequence.mask += [1] * len(completion)
        sequence.logprobs += [float(value) for value in logprobs]
        if get(step, "finish_reason") == "length":
            sequence.truncated_steps += 1
    assert sequence is not None  # steps is not empty
    return sequence


def has_token_ids(trajectory) -> bool:
    return bool(trajectory.steps) and all(step.prompt_token_ids and step.token_ids is not None
                                          for step in trajectory.steps)


def has_generation_markers(template: str | None) -> bool:
    import re

    return template is not None and re.search(r"\{%-?\s*generation\s*-?%\}", template) is not None


def training_template(tokenizer) -> str | None:
    """The tokenizer's template if it marks assistant turns, else TRL's training variant of it, else None."""
    if has_generation_markers(tokenizer.chat_template):
        return None  # the tokenizer's own
    try:
        from trl.chat_template_utils import get_training_chat_template

        return get_training_chat_template(tokenizer)
    except Exception as error:
        raise TrainError(
            "the tokenizer's chat template has no {% generation %} markers, so the assistant's tokens cannot be "
            f"told from the rest ({error}). Train on trajectories recorded by the local backend (they carry "
            "token ids: data.token_exact=always) or give the tokenizer a template with generation markers"
        ) from None


def render_sequence(tokenizer, messages: list[dict], tools: list[dict] | str | None,
                    chat_template: str | None = None) -> TokenSequence:
    """The whole conversation through the chat template; mask = its assistant tokens."""
    if isinstance(tools, str):
        tools = json.loads(tools) if tools else None
    output = tokenizer.apply_chat_template(
        template_messages(messages), tools=tools or None, return_dict=True, return_assistant_tokens_mask=True,
        chat_template=chat_template,
    )
    ids, mask = list(output["input_ids"]), list(output["assistant_masks"])
    first = mask.index(1) if 1 in mask else len(ids)
    return TokenSequence(ids[:first], ids[first:], mask[first:], [0.0] * (len(ids) - first))


def recorded_with(trajectory, tokenizer) -> bool:
    """Whether the recorded ids are this tokenizer's: its decoding of the first prompt is the first prompt
    as this tokenizer's chat template renders it."""
    step = trajectory.steps[0]
    try:
        rendered = tokenizer.apply_chat_template(
            template_messages(trajectory.messages[: step.first_message]), tools=trajectory.tools or None,
            tokenize=False, add_generation_prompt=True)
        return tokenizer.decode(step.prompt_token_ids, skip_special_tokens=False) == rendered
    except Exception:
        return False


def trajectory_sequence(trajectory, tokenizer, *, token_exact: str = "auto", chat_template=None) -> TokenSequence:
    """Token-exact when the run recorded ids with this tokenizer (and `token_exact` allows), else rendered
    from its messages. `chat_template` may be a callable, called only when a rendering is needed."""
    def rendered() -> TokenSequence:
        template = chat_template() if callable(chat_template) else chat_template
        return render_sequence(tokenizer, trajectory.messages, trajectory.tools, template)

    if token_exact != "never" and has_token_ids(trajectory):
        if token_exact == "auto" and not recorded_with(trajectory, tokenizer):
            return rendered()
        try:
            return chain_steps(trajectory.steps)
        except NotTokenExact:
            if token_exact == "always":
                raise
    elif token_exact == "always":
        raise NotTokenExact(f"trajectory {trajectory.id} recorded no token ids")
    return rendered()
