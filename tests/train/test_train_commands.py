"""`codeagent train sft|dpo|grpo` runs the trainer of its method (grpo's lives in train/grpo/trainer.py)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner


@pytest.mark.parametrize(("method", "module", "recipe"), [("sft", "codeagent.train.sft", "sft-tiny"),
                                                         ("dpo", "codeagent.train.dpo", "dpo-tiny"),
                                                         ("grpo", "codeagent.train.grpo.trainer", "grpo-tiny")])
def test_each_train_command_runs_the_trainer_of_its_method(monkeypatch, tmp_path, method, module, recipe):
    from codeagent.cli.train_commands import train_group

    ran = []
    monkeypatch.setattr(f"{module}.run", lambda loaded: ran.append(loaded.method) or tmp_path / "adapter")
    result = CliRunner().invoke(train_group, [method, "-c", recipe, f"output_dir={tmp_path}"])
    assert result.exit_code == 0, result.output
    assert ran == [method] and f"adapter saved to {tmp_path / 'adapter'}" in result.output
