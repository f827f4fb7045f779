"""Exit statuses are one enum that still reads and writes as the plain strings it always was."""

from __future__ import annotations

import json

from codeagent.status import LIMITS, ExitStatus
from codeagent.trajectory.schema import Trajectory


def test_exit_status_is_a_string_everywhere_it_goes():
    assert ExitStatus.SUBMITTED == "submitted" and ExitStatus("max_steps") is ExitStatus.MAX_STEPS
    assert f"{ExitStatus.MAX_TIME}" == str(ExitStatus.MAX_TIME) == "max_time"
    assert json.dumps({"exit_status": ExitStatus.MODEL_ERROR}) == '{"exit_status": "model_error"}'
    saved = Trajectory(id="t", exit_status=ExitStatus.PATCH_TOO_LARGE).model_dump_json()
    assert json.loads(saved)["exit_status"] == "patch_too_large"
    assert set(LIMITS) == {"max_steps", "max_cost", "max_time", "max_tool_calls"}
