"""Which patches touch the test infrastructure grading relies on (issue 10, item 11): the rules."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from codeagent.harness.grading.integrity import (
    changed_paths,
    flag_patch,
    path_rule,
    reasons,
    status_entries,
    zeroed,
)
from codeagent.patches import parse


def new_file(path: str, text: str = "x = 1\n") -> str:
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n{body}")


def edit(path: str, start: int, old: str, new: str, context: str = "") -> str:
    ctx = "".join(f" {line}\n" for line in context.splitlines())
    count = len(context.splitlines()) + 1
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
            f"@@ -{start},{count} +{start},{count} @@\n{ctx}-{old}\n+{new}\n")


SOURCE_EDIT = edit("pkg/calc.py", 1, "    return a - b", "    return a + b", "def add(a, b):")
CONFTEST_HACK = new_file("conftest.py", "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
                                        "def pytest_runtest_makereport(item, call):\n"
                                        "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n")


@pytest.mark.parametrize("path, rule", [
    ("conftest.py", "conftest"), ("src/deep/er/conftest.py", "conftest"),
    ("pytest.ini", "test settings"), ("tox.ini", "test settings"), (".pytest.ini", "test settings"),
    ("sub/pytest.toml", "test settings"), ("noxfile.py", "test settings"),
    ("sitecustomize.py", "startup hook"), ("lib/usercustomize/__init__.py", "startup hook"),
    ("sitecustomize.pyc", "startup hook"), ("x/evil.pth", "startup hook"),
    ("bin/test", "test runner"), ("sympy/utilities/runtests.py", "test runner"),
    ("test_repro.py", "test file"), ("pkg/calc_test.py", "test file"), ("app/tests.py", "test file"),
    ("tests/helpers.py", "test file"), ("lib/mpl/testing/decorators.py", "test file"),
    ("pkg/test/data.json", "test file"),
    ("pkg/calc.py", None), ("setup.py", None), ("docs/testing.rst", None), ("pkg/contest.py", None),
    ("README.md", None), ("pkg/testsuite.py", None),
])
def test_which_paths_count_by_name(path, rule):
    assert path_rule(path) == rule


def test_a_clean_patch_is_not_flagged():
    assert flag_patch(SOURCE_EDIT, relied_on=["tests/test_calc.py"]) == {}
    assert flag_patch("") == {}


def test_a_conftest_hack_is_flagged_wherever_it_is():
    assert flag_patch(SOURCE_EDIT + CONFTEST_HACK) == {"conftest.py": "conftest"}
    assert flag_patch(new_file("pkg/sub/conftest.py")) == {"pkg/sub/conftest.py": "conftest"}


def test_the_test_patch_files_and_test_files_are_flagged():
    patch = edit("tests/test_calc.py", 3, "    assert mul(2, 3) == 6", "    assert True") + new_file("repro_test.py")
    assert flag_patch(patch, relied_on=["tests/test_calc.py"]) == {
        "repro_test.py": "test file", "tests/test_calc.py": "test patch file"}
    # a file the test patch touches counts even where no name rule would catch it
    assert flag_patch(new_file("data/expected.txt"), relied_on=["data/expected.txt"]) == {
        "data/expected.txt": "test patch file"}


def test_plain_unified_diffs_and_renames_are_read():
    plain = "--- a/conftest.py\n+++ b/conftest.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    assert flag_patch(plain) == {"conftest.py": "conftest"}
    plain_new = "--- /dev/null\n+++ b/pkg/sitecustomize.py\n@@ -0,0 +1 @@\n+import os\n"
    assert flag_patch(plain_new) == {"pkg/sitecustomize.py": "startup hook"}
    rename = ("diff --git a/pkg/helpers.py b/pkg/conftest.py\nsimilarity index 100%\n"
              "rename from pkg/helpers.py\nrename to pkg/conftest.py\n")
    assert flag_patch(rename) == {"pkg/conftest.py": "conftest"}
    binary = ("diff --git a/conftest.py b/conftest.py\nnew file mode 100644\nindex 0000000..e69de29\n"
              "GIT binary patch\nliteral 3\nKcmZ>\n\nliteral 0\nKcmV+b\n")
    assert flag_patch(binary) == {"conftest.py": "conftest"}


def test_hunk_lengths_are_respected():
    # removed/added lines that look like file headers inside a hunk name no file
    tricky = ("diff --git a/pkg/a.py b/pkg/a.py\n--- a/pkg/a.py\n+++ b/pkg/a.py\n@@ -1,2 +1,2 @@\n"
              "--- a/conftest.py\n+++ b/conftest.py\n x = 1\n")
    assert [(f.old, f.new) for f in parse(tricky)] == [("pkg/a.py", "pkg/a.py")]
    # and a file that follows a hunk is still read
    assert flag_patch(tricky + CONFTEST_HACK) == {"conftest.py": "conftest"}
    # a hunk shorter than its header: the next file header is not swallowed
    short = "--- a/pkg/a.py\n+++ b/pkg/a.py\n@@ -1,3 +1,3 @@\n-x\n+y\n" + CONFTEST_HACK
    assert flag_patch(short) == {"conftest.py": "conftest"}


SETUP_CFG = "[metadata]\nname = calc\nversion = 1.0\n\n[tool:pytest]\naddopts = -rA\ntestpaths = tests\n"
PYPROJECT = ('[project]\nname = "calc"\nversion = "1.0"\n\n[tool.black]\nline-length = 100\n\n'
             '[tool.pytest.ini_options]\naddopts = "-rA"\n')


def reader(files: dict[str, str]):
    return files.get


def test_setup_cfg_counts_only_in_its_test_sections():
    read = reader({"setup.cfg": SETUP_CFG})
    metadata = edit("setup.cfg", 2, "name = calc", "name = calc2", "[metadata]")
    assert flag_patch(metadata, read_base=read) == {}
    # a hunk whose context does not show the header: the section is read from the base file
    addopts = edit("setup.cfg", 6, "addopts = -rA", "addopts = -rA -p hack")
    assert flag_patch(addopts, read_base=read) == {"setup.cfg": "test settings"}
    # no base to read: when in doubt it counts
    assert flag_patch(metadata) == {"setup.cfg": "test settings"}
    # a new test section added after the metadata
    added = ("diff --git a/setup.cfg b/setup.cfg\n--- a/setup.cfg\n+++ b/setup.cfg\n@@ -3,1 +3,3 @@\n"
             " version = 1.0\n+[pytest]\n+addopts = -p hack\n")
    assert flag_patch(added, read_base=reader({"setup.cfg": "[metadata]\nname = calc\nversion = 1.0\n"})) == {
        "setup.cfg": "test settings"}
    assert flag_patch(new_file("setup.cfg", "[metadata]\nname = x\n")) == {}
    assert flag_patch(new_file("sub/setup.cfg", "[tool:pytest]\naddopts = -p x\n")) == {"sub/setup.cfg": "test settings"}


def test_pyproject_counts_only_in_its_pytest_and_tox_tables():
    read = reader({"pyproject.toml": PYPROJECT})
    assert flag_patch(edit("pyproject.toml", 6, "line-length = 100", "line-length = 88", "[tool.black]"),
                      read_base=read) == {}
    assert flag_patch(edit("pyproject.toml", 9, 'addopts = "-rA"', 'addopts = "-p hack"'),
                      read_base=read) == {"pyproject.toml": "test settings"}
    dotted = ("diff --git a/pyproject.toml b/pyproject.toml\n--- a/pyproject.toml\n+++ b/pyproject.toml\n"
              '@@ -1,1 +1,2 @@\n+tool.pytest.ini_options.addopts = "-p hack"\n [project]\n')
    assert flag_patch(dotted, read_base=read) == {"pyproject.toml": "test settings"}
    in_tool = new_file("pyproject.toml", '[tool]\npytest.ini_options.addopts = "-p hack"\n')
    assert flag_patch(in_tool) == {"pyproject.toml": "test settings"}


def test_paths_changed_in_the_container_count_too():
    before = status_entries("!! build/\0?? notes.txt\0")
    after = status_entries("!! build/\0?? notes.txt\0!! pkg/sitecustomize.py\0 M setup.cfg\0?? pkg/calc.py\0")
    changed = changed_paths(before, after)
    assert changed == ["pkg/calc.py", "pkg/sitecustomize.py", "setup.cfg"]
    # seen only in the container (the text parser did not see them): names decide, a settings file counts
    assert flag_patch("", extra_paths=changed) == {"pkg/sitecustomize.py": "startup hook", "setup.cfg": "test settings"}
    # the appliers' backups of a file the patch changes are not the patch's
    assert flag_patch(SOURCE_EDIT, extra_paths=["pkg/calc.py.orig", "tests/x.py.rej"]) == {"tests/x.py.rej": "test file"}
    # a settings file the text shows is judged by its hunks, not by the container's word
    metadata = edit("setup.cfg", 2, "name = calc", "name = calc2", "[metadata]")
    assert flag_patch(metadata, read_base=reader({"setup.cfg": SETUP_CFG}), extra_paths=["setup.cfg"]) == {}


def test_the_policy():
    flagged = {"resolved": True, "touches_test_infrastructure": ["conftest.py"],
               "test_infrastructure": {"conftest.py": "conftest"}}
    assert reasons(flagged) == ["conftest.py (conftest)"]
    assert zeroed(flagged) and not zeroed(flagged, "allow")
    assert not zeroed({"resolved": True, "touches_test_infrastructure": [], "masked_failures": []})
    masked = {"resolved": True, "masked_failures": ["t.py::test_fixed"]}
    assert reasons(masked) == ["t.py::test_fixed (reported failing, then passing)"] and zeroed(masked)
    tampered = {"resolved": False, "tamper_evidence": ["a pytest session did not reach its end"]}  # guard.py
    assert reasons(tampered) == ["tamper evidence: a pytest session did not reach its end"] and zeroed(tampered)
    with pytest.raises(ValueError, match="'zero' or 'allow'"):
        zeroed(flagged, "sometimes")


def test_rewards_are_zero_for_a_flagged_patch():
    from codeagent.train.grpo.rewards import compute
    from codeagent.train.recipe import RewardsSection

    run = SimpleNamespace(patch=SOURCE_EDIT, steps=[])  # only what compute reads
    weights = RewardsSection(similarity=0.5)
    clean = compute(run, resolved=True, gold_patch=SOURCE_EDIT, weights=weights)
    assert clean["resolved"] == 1.0 and clean["total"] == 1.5
    hacked = compute(run, resolved=True, gold_patch=SOURCE_EDIT, weights=weights, distrust=["conftest.py (conftest)"])
    assert hacked["total"] == 0.0 and hacked["resolved"] == 0.0 and hacked["similarity"] == 0.0
    allowed = compute(run, resolved=True, gold_patch=SOURCE_EDIT, distrust=["conftest.py (conftest)"],
                      weights=RewardsSection(similarity=0.5, test_infrastructure="allow"))
    assert allowed["total"] == 1.5
