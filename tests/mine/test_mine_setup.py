"""The set-up agent of `codeagent tasks mine`: a candidate whose generic environment lets no test run
(its tests import a package nobody installs) is explored by a model (scripted here), which writes what
the tests need; the candidate is validated again with it and kept, the finding stored in the row."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from codeagent.mine.candidates import Skip
from codeagent.mine.setup_agent import SETUP_FILE, finding, repairable, with_setup
from codeagent.task import Task
from tests.support.history import CALC, FIXED, history_repo

TESTS = "import six\n\nfrom calc import add, mul\n\n\ndef test_mul():\n    assert mul(2, 3) == six.ensure_str('6') and True\n"
FIX_TESTS = TESTS + "\n\ndef test_add():\n    assert add(2, 3) == 5\n"
COMMITS = [
    ("calc", {"calc.py": CALC, "tests/test_calc.py": TESTS.replace("== six.ensure_str('6') and True", "== 6"),
              "conftest.py": ""}, "2024-01-01T00:00:00Z"),
    ("Fix add()\n\nadd() subtracted.", {"calc.py": FIXED, "tests/test_calc.py": FIX_TESTS.replace(
        "six.ensure_str('6') and True", "int(six.ensure_str('6'))")}, "2024-02-01T00:00:00Z"),
]


def _added(name: str, text: str) -> str:
    lines = text.splitlines()
    return (f"diff --git a/{name} b/{name}\nnew file mode 100644\n--- /dev/null\n+++ b/{name}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines))


def test_a_finding_is_checked_and_goes_into_the_environment():
    task = Task(repo="/r", problem_statement="p", instance_id="x", extra={
        "environment": {"python": "3.11", "pip_packages": ["pytest"], "install": []}})
    assert repairable(task, "no test results in any run: the tests do not run in this environment")
    assert repairable(task, "environment: pip install failed")
    assert repairable(task, "no test passed in any run: the tests do not run in this environment")
    assert not repairable(task, "no FAIL_TO_PASS test (3 pass->pass, 0 flaky)")
    assert not repairable(task.model_copy(update={"environment": {"language": "go"}}), "environment: x")
    found = finding(_added(SETUP_FILE, '{"pip_packages": ["six==1.16.0"],\n "install": ["make deps"]}'))
    assert found == {"pip_packages": ["six==1.16.0"], "install": ["make deps"]}
    fixed = with_setup(task, found, "scripted")
    assert fixed.environment["pip_packages"] == ["pytest", "six==1.16.0"]
    assert fixed.setup == {"model": "scripted", "found": found}
    assert not repairable(fixed, "environment: x")  # repaired once: never again
    for patch, why in (("", "wrote no"), (_added(SETUP_FILE, "{nope"), "is not JSON"),
                       (_added(SETUP_FILE, '{"env": ["A=1"]}'), "must be an object"),
                       (_added(SETUP_FILE, '{"pip_packages": "six"}'), "must be an object")):
        with pytest.raises(Skip, match=why):
            finding(patch)


@pytest.mark.usefixtures("no_leaks")
def test_the_set_up_agent_repairs_an_environment_and_the_candidate_is_kept(tmp_path):
    from codeagent.mine.mining import Options, mine, open_repository
    from codeagent.mine.progress import MiningProgress
    from codeagent.mine.setup_agent import setup_config
    from codeagent.models import ScriptedModel

    def call(number: int, name: str, arguments: dict) -> dict:
        return {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{number}", "type": "function", "function": {
            "name": name, "arguments": json.dumps(arguments)}}]}

    model = ScriptedModel([
        call(1, "bash", {"command": "python -m pytest -q tests 2>&1 | tail -n 3"}),
        call(2, "bash", {"command": f"printf '%s\\n' '{{\"pip_packages\": [\"six==1.16.0\"]}}' > {SETUP_FILE}"}),
        call(3, "submit", {}),
    ], name="scripted-setup")
    repo = history_repo(tmp_path, COMMITS)
    output = tmp_path / "mined.jsonl"
    with MiningProgress(Console(file=io.StringIO())) as progress:
        summary = mine(open_repository(str(repo), "synthetic/calc"), output,
                       Options(reruns=2, setup=(model, setup_config())), progress)
    assert len(model.calls) == 3 and "import six" not in model.calls[0][-1]["content"]
    assert "the tests do not build with the fix: E   ModuleNotFoundError: No module named 'six'" in model.calls[0][-1]["content"]  # told what happened
    assert summary.kept == 1, (tmp_path / "mined.rejects.jsonl").read_text()
    [row] = [json.loads(line) for line in output.read_text().splitlines()]
    assert row["FAIL_TO_PASS"] == ["tests/test_calc.py::test_add"]
    assert row["PASS_TO_PASS"] == ["tests/test_calc.py::test_mul"]
    assert "six==1.16.0" in row["environment"]["pip_packages"]  # data: grading needs no model
    assert row["provenance"]["setup"] == {"model": "scripted-setup", "found": {"pip_packages": ["six==1.16.0"]}}
