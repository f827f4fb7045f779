"""Model backends behind one protocol: `complete(messages, tools, sampling) -> ModelResponse`.

Nothing here imports litellm; LiteLLMModel imports it on its first call.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import (
    ContextWindowExceeded,
    ModelConfigError,
    ModelError,
    ModelRequestError,
    ModelUnavailable,
    ReplayExhausted,
)
from .litellm_model import LiteLLMModel
from .replay import ReplayModel, ScriptedModel
from .types import Model, ModelResponse, Sampling, ToolCall, Usage

# `prefix:rest` model specs that are not litellm model names, as "module:factory". A factory is
# called with `rest` and the options given to make_model.
BACKENDS: dict[str, str] = {
    "replay": "codeagent.models.replay:ReplayModel.from_spec",
    "hf": "codeagent.models.hf:HFModel.from_spec",  # local transformers model, token-exact
}


def model_options(settings: Any) -> dict[str, Any]:
    """make_model's options from the config's `model` section (ModelSettings)."""
    return {"api_base": settings.api_base, "retries": settings.retries, "native_tools": settings.native_tools,
            "timeout": settings.timeout, "total_timeout": settings.total_timeout,
            "stream": getattr(settings, "stream", True)}


def model_from_settings(settings: Any, name: str | None = None) -> Model:
    """The model of the config's `model` section (ModelSettings); `name` picks another model with
    the same endpoint and options (a candidate's, the judge's)."""
    return make_model(name if name is not None else settings.name or "", **model_options(settings))


def make_model(spec: str, **options: Any) -> Model:
    """`replay:PATH|ID` -> ReplayModel; any other spec is a litellm model name."""
    if not spec or not spec.strip():
        raise ModelConfigError("no model configured: set `model` in the config file or pass --model")
    prefix, sep, rest = spec.partition(":")
    if sep and prefix in BACKENDS:
        module_name, _, attribute = BACKENDS[prefix].partition(":")
        factory: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            factory = getattr(factory, part)
        if not rest:
            raise ModelConfigError(f"model spec {spec!r} needs something after '{prefix}:'")
        return factory(rest, **options)
    return LiteLLMModel(spec, **options)


__all__ = [
    "BACKENDS",
    "ContextWindowExceeded",
    "LiteLLMModel",
    "Model",
    "ModelConfigError",
    "ModelError",
    "model_from_settings",
    "ModelRequestError",
    "ModelResponse",
    "ModelUnavailable",
    "ReplayExhausted",
    "ReplayModel",
    "Sampling",
    "ScriptedModel",
    "ToolCall",
    "Usage",
    "make_model",
    "model_options",
]
