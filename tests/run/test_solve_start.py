"""The start of a run: the model's check (litellm's import: seconds) runs while the sandbox starts."""

from __future__ import annotations

import threading

import pytest

from codeagent.config import Config
from codeagent.models import ModelConfigError, ScriptedModel
from codeagent.run.solve import solve
from codeagent.task import Task


def test_the_sandbox_starts_while_the_model_is_checked_and_goes_when_the_check_fails(tmp_path):
    opened, closed = threading.Event(), threading.Event()

    class Box:
        def __enter__(self):
            return self

        def __exit__(self, *exc_info):
            closed.set()

    def factory():
        opened.set()
        return Box()

    model = ScriptedModel([])

    def check():  # as slow as an import: it gives the sandbox time to start, and fails at the end
        assert opened.wait(30), "the sandbox was not started while the model was checked"
        raise ModelConfigError("model 'x' needs X_API_KEY")

    model.check = check
    task = Task(repo=str(tmp_path), problem_statement="fix it", base_commit="HEAD")
    with pytest.raises(ModelConfigError, match="X_API_KEY"):
        solve(task, Config(), model, sandbox_factory=factory, localize=False)
    assert closed.is_set()  # the sandbox started for nothing is removed


def test_an_interrupt_in_the_check_reaches_the_caller(tmp_path):
    model = ScriptedModel([])

    def check():
        raise KeyboardInterrupt

    model.check = check
    task = Task(repo=str(tmp_path), problem_statement="fix it", base_commit="HEAD")
    with pytest.raises(KeyboardInterrupt):
        solve(task, Config(), model, sandbox_factory=lambda: _NullBox(), localize=False)


class _NullBox:
    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        pass
