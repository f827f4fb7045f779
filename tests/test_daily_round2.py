"""Issue 38's smaller items (7) that a unit can show: counts are said right ("1 step")."""

from __future__ import annotations

import io

from codeagent.events import Finished, SubagentFinished
from codeagent.run.printers import ProgressPrinter


def test_one_step_is_one_step_not_one_steps():
    out = io.StringIO()
    ProgressPrinter(stream=out, compact=True)(Finished(run_id="r", trajectory_id="r", exit_status="answered", steps=1))
    ProgressPrinter(stream=out)(SubagentFinished(run_id="r", name="sub-1", exit_status="submitted", steps=1))
    ProgressPrinter(stream=out, compact=True)(Finished(run_id="s", trajectory_id="s", exit_status="answered", steps=2))
    text = out.getvalue()
    assert "answered · 1 step ·" in text and "submitted, 1 step," in text and "answered · 2 steps ·" in text
    assert "1 steps" not in text
