"""A local transformers model behind the Model protocol, token-exact.

Every response carries the exact prompt token ids the model was fed, the completion token ids it
sampled and their log-probabilities, so a trajectory recorded through the agent loop is directly
trainable (RL trains on the tokens that were generated, never on a re-tokenized rendering).

Multi-turn exactness: when a conversation continues one this model answered before, the new prompt
is the previous prompt and completion ids *as generated*, followed by the tokens of what was added
since (tool results, a user turn, the next generation prompt). Those added tokens are the only
ones that come from rendering text, and they are observations, which training masks out. When the
history was changed (e.g. elided to fit the context), the prompt is rendered afresh.

Generation runs on the batched engine (models/batching.py) unless another generator is given:
concurrent `complete` calls (rollout workers, `serve` connections) are decoded together, and no lock
is held across one sequence. `start` renders a turn and `finish` generates it, for callers that must
let go of the request before generating (serve).

Tool calls are read from the reply text (`<tool_call>{...}</tool_call>`, the Qwen convention,
which the chat template also uses to show tools and past calls).

Spec for `make_model`: `hf:PATH` where PATH is a model directory, a hub id, or a PEFT adapter
directory (its base model is loaded, then the adapter).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .batching import BatchedTransformersEngine
from .errors import ContextWindowExceeded, ModelConfigError
from .text_protocol import response_from_text
from .token_sampling import pick_token
from .types import ModelResponse, Sampling, Usage, tool_names

log = logging.getLogger(__name__)

DEFAULT_MAX_NEW_TOKENS = 1024
MAX_CHARS_PER_TOKEN = 64  # more than any tokenizer's longest token covers on real text


class Generator(Protocol):
    """Samples a completion for prompt token ids: (completion ids, their logprobs, hit a stop token)."""

    def generate(self, prompt_ids: list[int], *, max_new_tokens: int, temperature: float, top_p: float | None,
                 seed: int | None, stop_ids: set[int]) -> tuple[list[int], list[float], bool]: ...


class TransformersGenerator:
    """Sampling with the model itself: a KV-cached loop, one sequence and one token at a time, logprobs
    exact. The reference the batched engine (models/batching.py, the default) is tested against, and the
    one-at-a-time baseline of bench/rollout_throughput.py: its lock serializes whole sequences.

    Tokens and logprobs follow `pick_token` (models/token_sampling.py), the rule of the batched engine.
    The model is switched to eval mode (no dropout, LoRA dropout included) while it generates.
    """

    def __init__(self, model, lock: threading.Lock | None = None):
        self.model = model
        self.lock = lock or threading.Lock()

    def generate(self, prompt_ids, *, max_new_tokens, temperature, top_p, seed, stop_ids):
        import torch

        with self.lock, torch.no_grad():
            model = self.model
            was_training = model.training
            model.eval()
            try:
                return self._sample(model, prompt_ids, max_new_tokens, temperature, top_p, seed, stop_ids)
            finally:
                if was_training:
                    model.train()

    @staticmethod
    def _sample(model, prompt_ids, max_new_tokens, temperature, top_p, seed, stop_ids):
        import torch

        device = next(model.parameters()).device
        generator = None
        if seed is not None:
            generator = torch.Generator(device=device)
            generator.manual_seed(int(seed))
        input_ids = torch.tensor([prompt_ids], device=device)
        past = None
        ids: list[int] = []
        logprobs: list[float] = []
        for _ in range(max_new_tokens):
            output = model(input_ids=input_ids, past_key_values=past, use_cache=True)
            past = output.past_key_values
            token, logprob = pick_token(output.logits[0, -1].float(), temperature, top_p, generator)
            ids.append(token)
            logprobs.append(logprob)
            if token in stop_ids:
                return ids, logprobs, True
            input_ids = torch.tensor([[token]], device=device)
        return ids, logprobs, False


@dataclass
class Turn:
    """One turn, rendered and ready to generate (HFModel.start, then HFModel.finish)."""

    prompt_ids: list[int]
    limit: int
    sampling: Sampling
    tool_names: list[str]
    history: str  # the conversation as JSON, for the continuation cache


class HFModel:
    """`complete(messages, tools, sampling)` with a transformers model and its tokenizer's chat template."""

    def __init__(self, model, tokenizer, name: str = "hf", *, generator: Generator | None = None,
                 max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, context_tokens: int | None = None,
                 chat_template_kwargs: dict[str, Any] | None = None, cache_size: int = 512):
        if getattr(tokenizer, "chat_template", None) is None:
            raise ModelConfigError(
                f"the tokenizer of {name} has no chat template; the local backend needs one that renders "
                "tools and tool calls (e.g. a Qwen instruct model's)"
            )
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        if generator is None:
            generator = BatchedTransformersEngine(model, pad_id=tokenizer.pad_token_id, name=name)
        self.generator = generator
        self.max_new_tokens = max_new_tokens
        self.context_tokens = context_tokens or getattr(getattr(model, "config", None), "max_position_embeddings",
                                                        None)
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.stop_ids = _stop_ids(model, tokenizer)
        self._continuations: OrderedDict[str, tuple[list[int], bool]] = OrderedDict()
        self._cache_size = cache_size
        self._cache_lock = threading.Lock()

    # -- construction ------------------------------------------------------------------------------

    @classmethod
    def from_spec(cls, spec: str, **options: Any) -> HFModel:
        """`hf:PATH` from make_model; litellm-only options (api_base, retries, ...) are ignored."""
        known = {key: options[key] for key in ("adapter", "dtype", "device", "max_new_tokens") if key in options}
        return cls.load(spec, **known)

    @classmethod
    def load(cls, path: str, adapter: str | None = None, *, dtype: str | None = None, device: str | None = None,
             max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, merge: bool = False) -> HFModel:
        """A model directory or hub id, optionally with a PEFT adapter; PATH may itself be an adapter."""
        model, tokenizer = load_model_and_tokenizer(path, adapter, dtype=dtype, device=device, merge=merge)
        name = f"hf:{path}" + (f"+{adapter}" if adapter else "")
        return cls(model, tokenizer, name=name, max_new_tokens=max_new_tokens)

    # -- the protocol ------------------------------------------------------------------------------

    def complete(self, messages: list[dict], tools: list[dict], sampling: Sampling) -> ModelResponse:
        return self.finish(self.start(messages, tools, sampling))

    def start(self, messages: list[dict], tools: list[dict], sampling: Sampling | None) -> Turn:
        """Everything a turn needs from the conversation, rendered: its prompt ids, limit and tool names.
        What it keeps is compact (ids and one JSON string), whatever the request's objects were."""
        sampling = sampling or Sampling()
        prompt_ids = self.prompt_ids(messages, tools)
        limit = sampling.max_tokens or self.max_new_tokens
        if self.context_tokens:
            room = self.context_tokens - len(prompt_ids)
            if room <= 0:
                raise ContextWindowExceeded(
                    f"{self.name}: the prompt has {len(prompt_ids)} tokens, the context window {self.context_tokens}"
                )
            limit = min(limit, room)
        return Turn(prompt_ids, limit, sampling, tool_names(tools), _history(messages, tools))

    def finish(self, turn: Turn) -> ModelResponse:
        """Generate the turn (on the batched engine, with whatever other turns wait) and parse the reply."""
        sampling = turn.sampling
        ids, logprobs, stopped = self.generator.generate(
            turn.prompt_ids, max_new_tokens=turn.limit, temperature=sampling.temperature, top_p=sampling.top_p,
            seed=sampling.seed, stop_ids=set(self.stop_ids),
        )
        text_ids = ids[:-1] if stopped else ids
        text = self.tokenizer.decode(text_ids, skip_special_tokens=True)
        if sampling.stop:
            text = _cut_at_stop(text, sampling.stop)
        response = response_from_text(
            text, turn.tool_names,
            usage=Usage(prompt_tokens=len(turn.prompt_ids), completion_tokens=len(ids), cost=None),
            finish_reason="stop" if stopped else "length",
            token_ids=ids, logprobs=logprobs, prompt_token_ids=turn.prompt_ids,
        )
        key = _digest_history(_extended(turn.history, response.to_message()))
        with self._cache_lock:
            self._continuations[key] = (turn.prompt_ids + ids, stopped)
            while len(self._continuations) > self._cache_size:
                self._continuations.popitem(last=False)
        return response

    def release(self, ids: list[int]) -> None:
        """A conversation ended with these ids (its last prompt + completion): the engine drops the KV it
        kept for that conversation's next turn (models/prefix_cache.py)."""
        release = getattr(self.generator, "release", None)
        if release is not None:
            release(ids)

    def close(self) -> None:
        """Stop the generator's worker, if it has one (the batched engine)."""
        close = getattr(self.generator, "close", None)
        if close is not None:
            close()

    def count_tokens(self, messages: list[dict]) -> int:
        return len(self._encode(self.render(messages, None, add_generation_prompt=False)))

    # -- prompts -----------------------------------------------------------------------------------

    def render(self, messages: list[dict], tools: list[dict] | None, *, add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            template_messages(messages), tools=tools or None, tokenize=False,
            add_generation_prompt=add_generation_prompt, **self.chat_template_kwargs,
        )

    def prompt_ids(self, messages: list[dict], tools: list[dict] | None) -> list[int]:
        """The exact ids to feed: a continuation of a conversation this model answered, or a fresh rendering."""
        text = self.render(messages, tools, add_generation_prompt=True)
        if self.context_tokens and len(text) > self.context_tokens * MAX_CHARS_PER_TOKEN:
            # refused before tokenizing: a tokenizer takes ~100 bytes per token of a text this long
            raise ContextWindowExceeded(
                f"{self.name}: the prompt has {len(text)} characters, more than a context window of "
                f"{self.context_tokens} tokens can hold")
        last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=None)
        if last is not None:
            with self._cache_lock:
                cached = self._continuations.get(_digest(messages[: last + 1], tools))
            if cached is not None:
                ids, stopped = cached
                before = self.render(messages[: last + 1], tools, add_generation_prompt=False)
                eos = self.tokenizer.eos_token or ""
                cut = before.rfind(eos) if eos else -1
                if cut >= 0 and text.startswith(before):
                    # What the template puts after the assistant's end-of-turn token, then the new turns.
                    added = ("" if stopped else eos) + before[cut + len(eos):] + text[len(before):]
                    return ids + self._encode(added)
                log.debug("%s: the history changed since the last reply; rendering the prompt afresh", self.name)
        return self._encode(text)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])


# -- helpers -----------------------------------------------------------------------------------------

def template_messages(messages: list[dict]) -> list[dict]:
    """Messages in the shape chat templates read: content never None, tool-call arguments parsed
    into objects (text that is not JSON is kept as it is: the template writes it out)."""
    out = []
    for message in messages:
        message = {key: value for key, value in message.items() if value is not None}
        message.setdefault("content", "")
        if message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = dict(call.get("function") or {})
                arguments = function.get("arguments")
                if isinstance(arguments, str):
                    try:
                        function["arguments"] = json.loads(arguments) if arguments.strip() else {}
                    except json.JSONDecodeError:
                        pass
                calls.append({**call, "function": function})
            message["tool_calls"] = calls
        out.append(message)
    return out


def _history(messages: list[dict], tools: list[dict] | None) -> str:
    # As the template reads them: a client sends back `content: null` or "" and arguments as text or
    # objects, and the same conversation must find its continuation (served multi-turn runs).
    return json.dumps([tools or [], template_messages(messages)], sort_keys=True, ensure_ascii=False, default=str)


def _extended(history: str, message: dict) -> str:
    """`_history(messages + [message], tools)` from `_history(messages, tools)` (messages not empty)."""
    added = json.dumps(template_messages([message])[0], sort_keys=True, ensure_ascii=False, default=str)
    return f"{history[:-2]}, {added}]]"


def _digest_history(history: str) -> str:
    return hashlib.sha256(history.encode()).hexdigest()


def _digest(messages: list[dict], tools: list[dict] | None) -> str:
    return _digest_history(_history(messages, tools))


def _cut_at_stop(text: str, stops: list[str]) -> str:
    positions = [text.find(stop) for stop in stops if stop and stop in text]
    return text[: min(positions)] if positions else text


def _stop_ids(model, tokenizer) -> set[int]:
    ids: set[int] = set()
    for source in (getattr(getattr(model, "generation_config", None), "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(source, int):
            ids.add(source)
        elif isinstance(source, (list, tuple)):
            ids.update(int(i) for i in source)
    if not ids:
        raise ModelConfigError("the tokenizer defines no end-of-turn (eos) token; generation could never stop")
    return ids


def resolve_base(path: str) -> tuple[str, str | None]:
    """(base model, adapter or None) for PATH: a PEFT adapter directory names its base model."""
    config = Path(path).expanduser() / "adapter_config.json"
    if config.is_file():
        base = json.loads(config.read_text()).get("base_model_name_or_path")
        if not base:
            raise ModelConfigError(f"{config} does not say which base model the adapter belongs to")
        return base, str(Path(path).expanduser())
    return path, None


def check_model_path(path: str) -> None:
    """A local path must exist; anything else is taken as a hub id (which may be unreachable)."""
    expanded = Path(path).expanduser()
    looks_local = path.startswith((".", "/", "~")) or expanded.exists() or path.count("/") > 1
    if looks_local and not expanded.exists():
        raise ModelConfigError(f"no model at {path}: the directory does not exist")
    if expanded.is_dir() and not (expanded / "config.json").is_file():
        raise ModelConfigError(
            f"{path} is not a model directory: it has no config.json (expected the output of save_pretrained, "
            "or a PEFT adapter directory with adapter_config.json)"
        )


def load_model_and_tokenizer(path: str, adapter: str | None = None, *, dtype: str | None = None,
                             device: str | None = None, merge: bool = False, trust_remote_code: bool = False):
    """Load a causal LM and its tokenizer; errors name the path and what to do."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as error:
        raise ModelConfigError(
            f"the local model backend needs torch and transformers ({error}); pip install 'codeagent[train]'"
        ) from error
    base, own_adapter = resolve_base(path)
    adapter = adapter or own_adapter
    check_model_path(base)
    if adapter is not None and not (Path(adapter).expanduser() / "adapter_config.json").is_file():
        raise ModelConfigError(f"no PEFT adapter at {adapter}: adapter_config.json is missing")
    tokenizer_source = adapter if adapter and (Path(adapter) / "tokenizer_config.json").is_file() else base
    try:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_source, trust_remote_code=trust_remote_code)
        torch_dtype = getattr(torch, dtype) if isinstance(dtype, str) and dtype != "auto" else (dtype or "auto")
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch_dtype, trust_remote_code=trust_remote_code)
    except OSError as error:
        raise ModelConfigError(
            f"cannot load the model {base!r}: {error}. Give a local directory (save_pretrained output) or a hub "
            "id that can be downloaded from here"
        ) from error
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter)
        if merge:
            model = model.merge_and_unload()
    if device:
        model.to(device)
    elif torch.cuda.is_available():
        model.to("cuda")
    model.eval()
    return model, tokenizer
