"""Statements a solver can act on (issue 37): the pull request's title and body, its issue's text; a merge
line, a version or a ticket number is no statement; a kept task's statement states what its tests check
(the new names, the exact messages), written by a model from the tests (never the fix) when one is given;
a name the statement legitimately mentions is no leak."""

from __future__ import annotations

import pytest

from codeagent.mine.candidates import Skip
from codeagent.mine.mining import Options, final_statement, open_repository, prepare
from codeagent.mine.specify import requirements, underspecified
from codeagent.mine.statement import leaks, referenced_issues, says_nothing, statement
from codeagent.mine.validate import Validation
from codeagent.mine.walk import history
from codeagent.models import ScriptedModel
from tests.support.git import git
from tests.support.history import history_repo

# A pull request that adds an option and new error messages (the shape of pflag's #337 and #469).
GOLD = """diff --git a/flag.go b/flag.go
--- a/flag.go
+++ b/flag.go
@@ -10,6 +10,18 @@ type FlagSet struct {
     Usage func()
+    // PassUnknownFlagToArgs treats unknown flags as arguments
+    PassUnknownFlagToArgs
+    ParseErrorsAllowlist ParseErrorsAllowlist
 }
+
+func (f *FlagSet) BoolFunc(name, usage string, fn func(string) error) {
+    f.VarP(boolFuncValue(fn), name, "", usage)
+}
+
+func parseBool(name, raw string) error {
+    return fmt.Errorf("invalid argument %q for %q flag: must be true or false", raw, "--"+name)
+}
"""
TESTS = """diff --git a/flag_test.go b/flag_test.go
--- a/flag_test.go
+++ b/flag_test.go
@@ -1,3 +1,14 @@ func TestParse(t *testing.T) {
     f := NewFlagSet("test", ContinueOnError)
+func TestBoolFunc(t *testing.T) {
+    f := NewFlagSet("test", ContinueOnError)
+    f.BoolFunc("debug", "", func(string) error { return nil })
+}
+
+func TestBoolError(t *testing.T) {
+    err := f.Parse([]string{"--bool=x"})
+    if err.Error() != `invalid argument "x" for "--bool" flag: must be true or false` {
+        t.Fatal(err)
+    }
+}
"""


@pytest.mark.parametrize("text", [
    "Proposed 2.8.0", "Merge remote-tracking branch 'origin/master'", "Merge pull request #4992 from AntoineMath/file_mode",
    "v1.2.3", "Release 2.0.1 (#812)", "Fixes #123", "Bump version to 3.0.0.dev0", "JIRA-1234",
])
def test_a_merge_line_a_version_or_a_ticket_says_nothing(text):
    assert says_nothing(text).startswith("the statement says nothing to act on")


def test_a_statement_that_says_something_passes():
    assert says_nothing("Fix add() (#12)\n\nadd() subtracted its arguments instead of adding them.") is None


def test_the_pull_requests_title_and_body_then_its_issues_text():
    message = ("Merge pull request #8721 from tk0miya/8720_viewcode_incremental\n\n"
               "viewcode: creates pages for epub even if viewcode_enable_epub=False\n\nSigned-off-by: someone <a@b>")
    assert referenced_issues(message) == ["8721", "8720"]  # the pull request's own text, then the branch's issue
    text = statement(message, {"8720": "viewcode makes pages for epub on `make html epub`", "9": "unrelated"})
    assert text == ("viewcode: creates pages for epub even if viewcode_enable_epub=False\n\n"
                    "Issue #8720:\nviewcode makes pages for epub on `make html epub`")


def test_a_name_or_a_message_the_statement_states_is_no_leak_but_code_is():
    said = "Add `PassUnknownFlagToArgs`; `BoolFunc(name, usage string, fn func(string) error)` defines a flag."
    assert leaks(said, GOLD) == []  # a name, a signature: what a statement legitimately says
    code = said + " Do it with f.VarP(boolFuncValue(fn), name, \"\", usage) and return fmt.Errorf(...)"
    assert leaks(code + ' return fmt.Errorf("invalid argument %q for %q flag: must be true or false", raw, "--"+name)',
                 GOLD) == ['return fmt.Errorf("invalid argument %q for %q flag: must be true or false", raw, "--"+name)']


def test_the_requirements_are_the_new_names_and_the_messages_the_tests_compare():
    found = requirements(GOLD, TESTS)
    # not FlagSet, not NewFlagSet: they exist already; the message's fixed parts, between its placeholders
    assert found == ["BoolFunc", "invalid argument", "flag: must be true or false"]
    assert underspecified("Replace raw stdlib parse errors in typed flag Set methods (#269)", found) == (
        "statement underspecified: the tests check 'BoolFunc', 'invalid argument', 'flag: must be true or false', "
        "which it does not state")
    assert underspecified('Add FlagSet.BoolFunc. `--bool=x` fails with: invalid argument "x" for "--bool" flag: '
                          "must be  true or false.", found) is None


def _validation() -> Validation:
    return Validation(["TestBoolFunc", "TestBoolError"], ["TestParse"], [], [], {"gold": "resolved", "empty": "unresolved"},
                      failures="flag_test.go:3: f.BoolFunc undefined (type *FlagSet has no field or method BoolFunc)")


def _task(repo):
    task = prepare(repo, next(c for c in history(repo.git_dir) if c.message.startswith("Fix add()")), Options(),
                   frozenset(), None, set())
    return task.model_copy(update={"gold_patch": GOLD, "test_patch": TESTS,
                                   "problem_statement": "Replace raw stdlib parse errors in typed flag Set methods"})


@pytest.fixture
def repo(tmp_path):
    return open_repository(str(history_repo(tmp_path)), "synthetic/calc")


def test_an_underspecified_history_statement_is_no_task(repo):
    with pytest.raises(Skip, match=r"statement underspecified: the tests check 'BoolFunc', .* \(history\)"):
        final_statement(_task(repo), _validation(), Options())


def test_a_model_writes_the_statement_from_the_tests_never_the_fix(repo):
    written = ("Users need `FlagSet.BoolFunc(name, usage, fn)`: a boolean flag that calls fn. Parsing `--bool=x` "
               "must fail with: invalid argument \"x\" for \"--bool\" flag: must be true or false")
    model = ScriptedModel([written], name="scripted-writer")
    text, made = final_statement(_task(repo), _validation(), Options(statement_model=model))
    assert text == written and made == {"source": "model:scripted-writer", "requirements": ["BoolFunc", "invalid argument",
                                                                                       "flag: must be true or false"]}
    [prompt] = [call[-1]["content"] for call in model.calls]
    assert "TestBoolError" in prompt and "f.BoolFunc undefined" in prompt and "- BoolFunc" in prompt  # tests, failures
    assert "boolFuncValue" not in prompt and "f.VarP" not in prompt  # never the fix


@pytest.mark.parametrize("reply, reason", [
    ("Add a BoolFunc flag.", "statement underspecified: the tests check 'invalid argument'"),
    ("BoolFunc: invalid argument, flag: must be true or false. Implement with: f.VarP(boolFuncValue(fn), name, \"\", usage) then "
     "return fmt.Errorf(\"invalid argument %q for %q flag: must be true or false\", raw, \"--\"+name)",
     "statement leaks the fix (model:scripted)"),
    ("Proposed 2.8.0", "model:scripted: the statement says nothing"),
])
def test_a_model_statement_is_checked_the_same_way(repo, reply, reason):
    with pytest.raises(Skip, match=f"^{reason[:40]}".replace("(", r"\(").replace(")", r"\)")):
        final_statement(_task(repo), _validation(), Options(statement_model=ScriptedModel([reply])))


def test_a_unit_whose_statement_says_nothing_is_skipped_unless_a_model_will_write_one(tmp_path):
    root = history_repo(tmp_path)
    (root / "calc.py").write_text((root / "calc.py").read_text() + "\n# 2.8.0\n")
    (root / "tests" / "test_calc.py").write_text((root / "tests" / "test_calc.py").read_text() + "\n# 2.8.0\n")
    git(root, "commit", "-qam", "Proposed 2.8.0")
    repository = open_repository(str(root), "synthetic/calc")
    newest = history(repository.git_dir)[0]
    with pytest.raises(Skip, match="the statement says nothing to act on: 'Proposed 2.8.0'"):
        prepare(repository, newest, Options(), frozenset(), None, set())
    assert prepare(repository, newest, Options(statement_model=ScriptedModel([])), frozenset(), None, set())
