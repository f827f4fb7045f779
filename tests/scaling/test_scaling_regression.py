"""The regression verifier: choosing tests (unit) and catching a broken test in real Docker."""

from __future__ import annotations

import pytest

from codeagent.scaling.consensus import apply_consensus, expected_changes
from codeagent.scaling.regression import prepare_suite, score_candidates
from codeagent.scaling.relevant_tests import choose_test_files, discover_test_files, files_of_test_ids, source_files
from codeagent.scaling.types import Candidate
from codeagent.task import Task
from tests.support.calc import CONFIG, GOLD, NOT_APPLYING, REWRITES_REPORTS, SOURCE, TEST_PATCH
from tests.support.git import git

TESTS = ("from calc import add, mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n\n\n"
         "def test_mul_zero():\n    assert mul(0, 3) == 0\n\n\n"
         "def test_add_is_broken():\n    assert add(2, 3) == 5\n")  # fails on the original code


def fixes_add_and_changes_mul(body: str) -> str:
    """GOLD's hunk grown by mul's body (one hunk: two overlapping ones do not apply, officially)."""
    return GOLD.replace("@@ -1,5 +1,5 @@", "@@ -1,6 +1,6 @@") + f"-    return a * b\n+    {body}\n"


# Fixes add but breaks mul(0, x): one of the two passing tests.
BREAKS_ZERO = fixes_add_and_changes_mul("return a * b if a else 1")
# Fixes add but breaks both mul tests.
BREAKS_BOTH = fixes_add_and_changes_mul("return a + b")
# Breaks mul(0, x) and edits the test so that it would pass: the edit is undone before the run.
HIDES_THE_BREAK = BREAKS_ZERO + """diff --git a/tests/test_calc.py b/tests/test_calc.py
--- a/tests/test_calc.py
+++ b/tests/test_calc.py
@@ -8,3 +8,3 @@ def test_mul():
 def test_mul_zero():
-    assert mul(0, 3) == 0
+    assert mul(0, 3) == 1
 
"""


def test_files_of_test_ids():
    ids = ["tests/test_a.py::test_x", "tests/test_a.py::TestC::test_y[1]", "testing/test_b.py::test_z",
           "test_q (admin_views.tests.AdminViewTests)", "test_plain", "test_sub (admin.tests.T) (i=1)"]
    assert files_of_test_ids(ids) == ["tests/test_a.py", "testing/test_b.py", "tests/admin_views/tests.py"]


def test_source_files_skip_tests():
    patch = GOLD + TEST_PATCH + "--- a/src/pkg/mod.py\n+++ b/src/pkg/mod.py\n@@ -1 +1 @@\n-x\n+y\n"
    assert source_files([patch, GOLD]) == ["calc.py", "src/pkg/mod.py"]


def test_discovery_by_name_and_import(make_repo):
    repo = make_repo({
        "src/pkg/__init__.py": "", "src/pkg/mod.py": "X = 1\n", "src/pkg/other.py": "Y = 2\n",
        "tests/test_mod.py": "def test_x():\n    pass\n",
        "tests/test_uses.py": "from pkg.mod import X\n\ndef test_y():\n    assert X\n",
        "tests/test_unrelated.py": "def test_z():\n    pass\n",
        "src/pkg/tests/test_mod.py": "def test_w():\n    pass\n",
        "tests/test_other_user.py": "from pkg.other import Y\n\ndef test_v():\n    assert Y\n",
        "tests/test_everything.py": "import pkg.other\n" + "def test_q():\n    pass\n" * 50,
    })
    commit = git(repo, "rev-parse", "HEAD").strip()
    # named after the module, its own package's first; the file that merely imports it is not needed
    found = discover_test_files(repo / ".git", commit, ["src/pkg/mod.py"])
    assert found == ["src/pkg/tests/test_mod.py", "tests/test_mod.py"]
    # nothing named after it: the files importing it, smallest first
    assert discover_test_files(repo / ".git", commit, ["src/pkg/other.py"]) == [
        "tests/test_other_user.py", "tests/test_everything.py"]
    both = discover_test_files(repo / ".git", commit, ["src/pkg/mod.py", "src/pkg/other.py"], limit=3)
    assert both == ["src/pkg/tests/test_mod.py", "tests/test_other_user.py", "tests/test_mod.py"]  # round-robin
    task = Task(repo=str(repo), base_commit=commit, problem_statement="p")
    patch = "--- a/src/pkg/mod.py\n+++ b/src/pkg/mod.py\n@@ -1 +1 @@\n-X = 1\n+X = 3\n"
    assert choose_test_files(task, [patch]) == (found, "touched modules")
    with_p2p = task.model_copy(update={"PASS_TO_PASS": ["tests/test_unrelated.py::test_z"]})
    assert choose_test_files(with_p2p, [patch]) == (["tests/test_unrelated.py"], "PASS_TO_PASS")


def test_expected_changes_need_a_majority_of_two_or_more():
    a, b, c = "t::a", "t::b", "t::c"
    assert expected_changes([[a], [a], [], [b]], total=3) == set()  # 2 of 4 is not more than half
    assert expected_changes([[a], [a], [b]], total=3) == {a}
    assert expected_changes([[a]], total=3) == set()  # one run says nothing
    assert expected_changes([[a, b, c], [a, b, c], []], total=3) == set()  # everything broke: keep all
    assert expected_changes([[a, b], [a, b], []], total=3, threshold=0.7) == set()


def test_apply_consensus_on_stored_reports():
    def cand(index, broken, total=4, outcome="unresolved", **extra):
        report = {"outcome": outcome, "total": total, "score": 1 - len(broken) / total, "broken": broken,
                  "broken_count": len(broken), **extra}
        return Candidate(instance_id="t", index=index, patch="p", scores={"regression": report["score"]},
                         details={"regression": report})
    pool = [cand(0, ["x"]), cand(1, ["x"]), cand(2, ["x", "y"]), cand(3, []),
            Candidate(instance_id="t", index=4, patch="p", scores={"regression": 0.0},
                      details={"regression": {"outcome": "timeout", "score": 0.0, "broken": [], "total": 4}})]
    assert apply_consensus(pool) == {"x"}
    assert [c.scores["regression"] for c in pool] == [1.0, 1.0, round(1 - 1 / 3, 4), 1.0, 0.0]
    assert pool[2].details["regression"]["raw_score"] == 0.5 and pool[2].details["regression"]["expected_changes"] == ["x"]


@pytest.fixture(scope="module")
def calc_task(tmp_path_factory, base_image):
    repo = tmp_path_factory.mktemp("regression") / "calc"
    repo.mkdir()
    (repo / "calc.py").write_text(SOURCE)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_calc.py").write_text(TESTS)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc")
    return Task(repo=str(repo), base_commit=git(repo, "rev-parse", "HEAD").strip(), instance_id="synthetic__regr-1",
                problem_statement="add() subtracts", test_patch=TEST_PATCH, gold_patch=GOLD,
                FAIL_TO_PASS=["tests/test_calc.py::test_add"],
                PASS_TO_PASS=["tests/test_calc.py::test_mul", "tests/test_calc.py::test_mul_zero"],
                extra={"install_config": CONFIG})


@pytest.mark.usefixtures("no_leaks")
def test_regression_catches_a_broken_test(calc_task, tmp_path):
    patches = [GOLD, BREAKS_ZERO, BREAKS_BOTH, NOT_APPLYING, "", GOLD, HIDES_THE_BREAK]
    candidates = [Candidate(instance_id=calc_task.instance_id, index=i, patch=p) for i, p in enumerate(patches)]
    # "allow": HIDES_THE_BREAK edits a test file, which the default policy scores 0 (see below)
    suite = score_candidates(calc_task, candidates, cache_dir=tmp_path / "cache", consensus=None,
                             test_infrastructure="allow")
    assert suite.usable and suite.source == "PASS_TO_PASS" and suite.files == ["tests/test_calc.py"]
    assert suite.tests == ["tests/test_calc.py::test_mul", "tests/test_calc.py::test_mul_zero"]
    scores = [c.scores.get("regression") for c in candidates]
    assert scores == [1.0, 0.5, 0.0, 0.0, None, 1.0, 0.5]
    assert candidates[1].details["regression"]["broken"] == ["tests/test_calc.py::test_mul_zero"]
    assert candidates[1].details["regression"]["broken_status"] == {"tests/test_calc.py::test_mul_zero": "FAILED"}
    assert set(candidates[2].details["regression"]["broken"]) == set(suite.tests)
    assert candidates[3].details["discarded"] == "does not apply" and not candidates[3].usable
    assert candidates[4].details["regression"]["outcome"] == "not_run"

    # cached: a second pass runs nothing in Docker and gives the same scores
    again = [c.model_copy(update={"scores": {}, "details": {}}) for c in candidates[:3]]
    prepared = prepare_suite(calc_task, cache_dir=tmp_path / "cache")
    assert prepared.tests == suite.tests and prepared.base == suite.base
    score_candidates(calc_task, again, suite=prepared, cache_dir=tmp_path / "cache", consensus=None,
                     test_infrastructure="allow")
    assert [c.scores["regression"] for c in again] == [1.0, 0.5, 0.0]
    assert all(c.details["regression"]["seconds"] == o.details["regression"]["seconds"]
               for c, o in zip(again, candidates))

    # by default, a test most candidates break is taken as behaviour the fix changes: 3 of the 5
    # scored candidates break test_mul_zero, so it leaves every score (test_mul still counts)
    assert apply_consensus(candidates) == {"tests/test_calc.py::test_mul_zero"}
    assert [c.scores.get("regression") for c in candidates] == [1.0, 1.0, 0.0, 0.0, None, 1.0, 1.0]
    assert candidates[2].details["regression"]["raw_score"] == 0.0
    assert candidates[3].details["regression"]["outcome"] == "patch_apply_failed"  # not counted, still 0


# Breaks both mul tests and adds a root conftest.py whose hook turns every failure into a pass.
HOOKS_THE_REPORTS = BREAKS_BOTH + """diff --git a/conftest.py b/conftest.py
new file mode 100644
--- /dev/null
+++ b/conftest.py
@@ -0,0 +1,7 @@
+import pytest
+
+
+@pytest.hookimpl(hookwrapper=True)
+def pytest_runtest_makereport(item, call):
+    outcome = yield
+    outcome.get_result().outcome = "passed"
"""


@pytest.mark.usefixtures("no_leaks")
def test_a_patch_touching_test_infrastructure_scores_zero(calc_task, tmp_path):
    patches = [HOOKS_THE_REPORTS, HIDES_THE_BREAK, GOLD, REWRITES_REPORTS]
    candidates = [Candidate(instance_id=calc_task.instance_id, index=i, patch=p) for i, p in enumerate(patches)]
    score_candidates(calc_task, candidates, cache_dir=tmp_path / "cache", consensus=None)
    assert [c.scores["regression"] for c in candidates] == [0.0, 0.0, 1.0, 0.0]
    hooked, hidden, _, rewriting = (c.details["regression"] for c in candidates)
    # the hook hid the break from the log, not from codeagent's pytest guard (harness/grading/guard.py)
    assert hooked["outcome"] == "test_infrastructure" and hooked["run_outcome"] == "tamper_evidence"
    assert hooked["touches_test_infrastructure"] == ["conftest.py"] and hooked["tamper_evidence"]
    assert hidden["test_infrastructure"] == {"tests/test_calc.py": "test patch file"} and hidden["run_score"] == 0.5
    assert "touches_test_infrastructure" not in candidates[2].details["regression"]
    # issue 21, item 1: calc.py rewrites pytest's reports; no test infrastructure is touched
    assert rewriting["outcome"] == "test_infrastructure" and "touches_test_infrastructure" not in rewriting
    assert any("TestReport.from_item_and_call" in line for line in rewriting["tamper_evidence"])
    # configurable: "allow" scores the runs as they were (from the cache: nothing runs again); a run
    # whose log the guard contradicts has no score to allow
    again = [c.model_copy(update={"scores": {}, "details": {}}) for c in candidates]
    score_candidates(calc_task, again, cache_dir=tmp_path / "cache", consensus=None, test_infrastructure="allow")
    assert [c.scores["regression"] for c in again] == [0.0, 0.5, 1.0, 0.0]


@pytest.mark.usefixtures("no_leaks")
def test_regression_without_pass_to_pass_discovers_tests(calc_task):
    task = calc_task.model_copy(update={"PASS_TO_PASS": [], "instance_id": "synthetic__regr-2"})
    candidates = [Candidate(instance_id=task.instance_id, index=0, patch=BREAKS_ZERO),
                  Candidate(instance_id=task.instance_id, index=1, patch=GOLD)]
    suite = score_candidates(task, candidates)
    assert suite.source == "touched modules" and suite.files == ["tests/test_calc.py"]
    # every test passing on the original code counts; test_add_is_broken fails there, so it does not
    assert suite.tests == ["tests/test_calc.py::test_mul", "tests/test_calc.py::test_mul_zero"]
    assert [c.scores["regression"] for c in candidates] == [0.5, 1.0]


@pytest.mark.usefixtures("no_leaks")
def test_a_test_file_that_stops_the_run_is_dropped(tmp_path, base_image):
    """Without PASS_TO_PASS, discovery finds tests/test_calc.py and tests/test_extra.py; the latter
    fails to import and interrupts pytest for both, so each file is tried alone and only the
    working one is kept."""
    repo = tmp_path / "calc"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(SOURCE)
    (repo / "extra.py").write_text("Z = 1\n")
    (repo / "tests" / "test_calc.py").write_text(TESTS)
    (repo / "tests" / "test_extra.py").write_text("import not_installed_anywhere\n\n\ndef test_z():\n    pass\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc")
    task = Task(repo=str(repo), base_commit=git(repo, "rev-parse", "HEAD").strip(), instance_id="synthetic__regr-3",
                problem_statement="add() subtracts", extra={"install_config": CONFIG})
    touches_extra = BREAKS_ZERO + "--- a/extra.py\n+++ b/extra.py\n@@ -1 +1 @@\n-Z = 1\n+Z = 2\n"
    candidates = [Candidate(instance_id=task.instance_id, index=0, patch=touches_extra),
                  Candidate(instance_id=task.instance_id, index=1, patch=GOLD)]
    suite = score_candidates(task, candidates, consensus=None)
    assert suite.files == ["tests/test_calc.py"] and suite.base["dropped_files"] == ["tests/test_extra.py"]
    assert [c.scores["regression"] for c in candidates] == [0.5, 1.0]
