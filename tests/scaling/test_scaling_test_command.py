"""The regression verifier's test command when the repository names none: pytest, detected from its files."""

from __future__ import annotations

from codeagent.config import Config
from codeagent.sandbox import open_sandbox, snapshot
from codeagent.scaling.pipeline import verify
from codeagent.scaling.test_command import PYTEST, detect
from codeagent.scaling.types import Candidate
from codeagent.task import Task
from tests.support.calc import CALC_BUGGY as CALC


def reader(files):
    return lambda name: files.get(name)


def test_pytest_is_detected_from_settings_tox_or_test_files_and_nothing_else():
    cases = {
        "pytest.ini": {"pytest.ini": "[pytest]\n"},
        "pyproject.toml": {"pyproject.toml": "[project]\nname='x'\n[tool.pytest.ini_options]\naddopts='-q'\n"},
        "setup.cfg": {"setup.cfg": "[metadata]\nname=x\n[tool:pytest]\ntestpaths=tests\n"},
        "tox.ini": {"tox.ini": "[tox]\nenvlist=py3\n[testenv]\ndeps=pytest\ncommands = pytest {posargs}\n"},
    }
    for name, files in cases.items():
        assert detect(list(files), reader(files)) == (PYTEST, f"pytest, from the repository's {name}")
    files = {"src/calc.py": "", "tests/test_calc.py": ""}
    assert detect(list(files), reader(files))[1] == "pytest, for the repository's test files (tests/test_calc.py)"
    files = {"pyproject.toml": "[project]\nname='x'\n", "tox.ini": "[tox]\n[testenv]\ncommands = nose2\n",
             "calc.py": "", "README.md": "test_x.py"}
    assert detect(list(files), reader(files)) is None


TESTS = ("from calc import add, sub\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
         "def test_sub():\n    assert sub(3, 2) == 1\n")


def test_regression_runs_the_repositorys_pytest_without_a_configured_command(make_repo, tmp_path):
    repo = make_repo({"calc.py": CALC, "test_calc.py": TESTS})
    snap = snapshot(str(repo))
    task = Task(repo=str(repo), problem_statement="add() subtracts", base_commit=snap.commit)
    with open_sandbox(snap) as sandbox:  # one right patch, one that breaks sub()
        sandbox.write_file("calc.py", CALC.replace("return a - b", "return a + b", 1).encode())
        right = sandbox.diff()
        sandbox.write_file("calc.py", CALC.replace("a - b", "a + b").encode())
        wrong = sandbox.diff()
    candidates = [Candidate(instance_id=task.instance_id, index=0, patch=right),
                  Candidate(instance_id=task.instance_id, index=1, patch=wrong)]
    config = Config(trajectories_dir=str(tmp_path / "t"), scaling={"verifiers": ["regression"]})
    verify(task, config, candidates, lambda: open_sandbox(snap), lambda name: None)
    assert [c.scores.get("regression") for c in candidates] == [1.0, 0.0]
    assert candidates[1].details["regression"]["broken"] == ["test_calc.py::test_sub"]
    assert candidates[0].details["regression"]["command"] == (
        "python -m pytest -rA (pytest, for the repository's test files (test_calc.py))")
