"""The model of a run, and its check before anything is built on it. Light on purpose (no agent, sandbox or
scaling imports): a front end checks the model's server first, in milliseconds, and imports the rest after."""

from __future__ import annotations

import threading

from ..config import Config
from ..models import Model, ModelConfigError, make_model, model_from_settings


def resolve_model(config: Config, example: str | None) -> tuple[Model, bool]:
    """The configured model; with none configured, the example's recorded trajectory (replay)."""
    if config.model.name:
        model = model_from_settings(config.model)
        return model, config.model.name.startswith("replay:")
    if example:
        from .examples import example_replay

        return make_model(f"replay:{example_replay(example)}"), True
    raise ModelConfigError(
        "no model configured: pass --model (e.g. --model gpt-4o, --model anthropic/claude-sonnet-4-20250514, "
        "or --model hosted_vllm/NAME --api-base http://localhost:8000/v1), or set model.name in "
        "~/.config/codeagent/config.yaml (or a trusted repository's .codeagent.yaml). The provider's key comes from "
        "its usual variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...)."
    )


def preflight(model: Model, paid: bool = False) -> None:
    """Raise ModelConfigError if the model cannot be used as configured (e.g. its API key is not
    set, a server does not serve it), ModelUnavailable if its server is not there: asked before any
    sandbox is built, not found out after. `paid`: also one cheap completion for a model with no
    api_base (`/model` asks it; a run does not pay for it)."""
    probe, check = getattr(model, "probe", None), getattr(model, "check", None)
    if callable(probe):
        probe(paid=paid)  # the configuration's check included
    elif callable(check):
        check()


MODEL_CHECK_THREAD = "codeagent-model-check"
CLIENT_IMPORT_THREAD = "codeagent-litellm-import"  # models/first_request.py's Loader


def model_check_running() -> bool:
    """A model check, or the model client's import, is still going: the process must not be torn down
    under it (an import cut by the interpreter's teardown crashes it)."""
    return any(thread.name in (MODEL_CHECK_THREAD, CLIENT_IMPORT_THREAD) and thread.is_alive()
               for thread in threading.enumerate())


class ModelCheck:
    """`preflight(model)` in a thread of its own, started as soon as the model is known, in stages: a
    connection to its server (`connected`: milliseconds), its model list (`listed`), then the rest (the
    model client's import, seconds, overlapping the sandbox's start). `wait(stage)` gives the error found so
    far, if any, in the caller's thread (Ctrl-C still lands there: the waiting is interruptible). A run waits
    for the whole check before its first request (`solve`)."""

    STAGES = ("connected", "listed")

    def __init__(self, model: Model):
        self._error: BaseException | None = None
        self._passed = {stage: threading.Event() for stage in self.STAGES}
        self._thread = threading.Thread(target=self._check, args=(model,), name=MODEL_CHECK_THREAD,
                                        daemon=True)  # a Ctrl-C exit does not wait for an import
        self._thread.start()

    def _check(self, model: Model) -> None:
        try:
            for stage, method in zip(self.STAGES, ("connect", "probe_server")):
                if callable(step := getattr(model, method, None)):
                    step()
                self._passed[stage].set()
            if callable(start_light := getattr(model, "start_light", None)):
                start_light()  # a served model's first request need not wait for its client's import
            preflight(model)
        except BaseException as error:  # noqa: BLE001 - handed to the caller by wait()
            self._error = error
        finally:
            for passed in self._passed.values():
                passed.set()

    def wait(self, stage: str | None = None) -> None:
        """Until `stage` is passed (None: the whole check is over); raise what the check found meanwhile."""
        if stage is None:
            while self._thread.is_alive():
                self._thread.join(0.05)  # short waits: a signal's handler runs between them
        else:
            while not self._passed[stage].wait(0.05):
                pass
        if self._error is not None:
            error, self._error = self._error, None
            raise error
