"""The toolchain version of a unit's day (issue 37): go.mod's `go` line is a minimum, not the Go the
developers ran; the task's environment records the version the harness then installs. A candidate whose
tests do not build says so with the compiler's lines."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from codeagent.mine.candidates import candidate
from codeagent.mine.environment import task_for
from codeagent.mine.mining import open_repository
from codeagent.mine.toolchain_era import go_version, node_version
from codeagent.mine.validate import compiler_lines
from codeagent.mine.walk import history


@pytest.mark.parametrize("go_mod, when, version", [
    ("go 1.12\n", "2025-09-01T00:00:00Z", "1.25.14"),  # pflag: a 2025 commit is built with 2025's Go
    ("go 1.12\n", "2023-09-01T00:00:00Z", "1.21.13"),
    ("go 1.12\n", "2018-06-01T00:00:00Z", "1.12"),  # older than the table: the stated minimum (Debian's Go then)
    ("go 1.23\n", "2023-01-01T00:00:00Z", "1.23.12"),  # a newer minimum than the day's release wins
    ("go 1.21\ntoolchain go1.24.2\n", "2023-10-01T00:00:00Z", "1.24.2"),  # the toolchain line, exactly
])
def test_the_go_of_the_units_day(go_mod, when, version):
    assert go_version({"go.mod": go_mod}.get, when) == version


def test_no_go_mod_no_go_version():
    assert go_version({}.get, "2025-01-01T00:00:00Z") is None


@pytest.mark.parametrize("files, when, version", [
    ({"package.json": "{}"}, "2023-06-01T00:00:00Z", "18"),  # the LTS line of the day
    ({"package.json": "{}"}, "2024-11-15T00:00:00Z", "22"),
    ({"package.json": "{}", ".nvmrc": "v16.14.0\n"}, "2024-11-15T00:00:00Z", "16.14.0"),  # pinned
    ({"package.json": "{}", ".nvmrc": "lts/gallium\n"}, "2024-11-15T00:00:00Z", "16"),
    ({"package.json": json.dumps({"engines": {"node": ">=20"}})}, "2023-01-01T00:00:00Z", "20"),
    ({"package.json": json.dumps({"engines": {"node": ">=10 <17"}})}, "2024-01-01T00:00:00Z", "16"),
])
def test_the_node_of_the_units_day(files, when, version):
    assert node_version(files.get, when) == version


def test_a_go_task_records_the_version_in_its_environment(tmp_path):
    repo = tmp_path / "flags"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": "2025-09-01T00:00:00Z", "GIT_COMMITTER_DATE": "2025-09-01T00:00:00Z"}

    def commit(message: str, files: dict[str, str]) -> None:
        for name, text in files.items():
            (repo / name).write_text(text)
        for args in (["add", "-A"], ["commit", "-qm", message]):
            subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    commit("flags", {"go.mod": "module example.com/flags\n\ngo 1.12\n", "flag.go": "package flags\n\nfunc A() int { return 1 }\n",
                     "flag_test.go": "package flags\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) { _ = A() }\n"})
    commit("B() returns two for the new flag kind", {
        "flag.go": "package flags\n\nfunc A() int { return 1 }\n\nfunc B() int { return 2 }\n",
        "flag_test.go": "package flags\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) { _ = A() }\n\n"
                        "func TestB(t *testing.T) { if B() != 2 { t.Fatal() } }\n"})
    repository = open_repository(str(repo), "example/flags")
    task = task_for(repository, candidate(repository.git_dir, history(repository.git_dir)[0]))
    assert task.environment["toolchain_version"] == "1.25.14"
    assert task.environment["test_cmd"] == "go test -json ./..."


def test_the_compilers_lines_say_why_tests_do_not_build():
    go_json = "\n".join([
        json.dumps({"ImportPath": "example.com/flags [example.com/flags.test]", "Action": "build-output",
                    "Output": "# example.com/flags [example.com/flags.test]\n"}),
        json.dumps({"ImportPath": "example.com/flags [example.com/flags.test]", "Action": "build-output",
                    "Output": "./flag_test.go:12:4: f.BoolFunc undefined (type *FlagSet has no field or method BoolFunc)\n"}),
        json.dumps({"Action": "fail", "Package": "example.com/flags"})])
    assert compiler_lines(go_json) == ["./flag_test.go:12:4: f.BoolFunc undefined (type *FlagSet has no field or method BoolFunc)"]
    rust = "error[E0425]: cannot find function `parse_strict` in this scope\n  --> tests/test_parse.rs:3:5\n"
    assert compiler_lines(rust) == ["error[E0425]: cannot find function `parse_strict` in this scope",
                                    "--> tests/test_parse.rs:3:5"]
    java = "[ERROR] /testbed/gson/src/test/java/A.java:[12,5] cannot find symbol\n[INFO] BUILD FAILURE\n"
    assert compiler_lines(java) == ["[ERROR] /testbed/gson/src/test/java/A.java:[12,5] cannot find symbol"]
    cpp = "test/format-test.cc:40:3: error: 'group_digits' was not declared in this scope\nmake: *** Error 1\n"
    assert compiler_lines(cpp) == ["test/format-test.cc:40:3: error: 'group_digits' was not declared in this scope"]
    python = "ImportError while importing test module '/testbed/tests/test_a.py'.\nE   ImportError: cannot import name 'b' from 'a'\n"
    assert compiler_lines(python) == ["E   ImportError: cannot import name 'b' from 'a'"]
    assert compiler_lines("PASSED tests/test_a.py::test_a\n") == []


def test_a_compiled_test_missing_before_the_fix_is_fail_to_pass_only_when_the_test_patch_touches_it():
    from codeagent.mine.validate import lists_from_runs, touched_tests

    patch = ("diff --git a/ctx_test.go b/ctx_test.go\n--- a/ctx_test.go\n+++ b/ctx_test.go\n"
             "@@ -10,3 +10,9 @@ func TestContextBindWithXML(t *testing.T) {\n     c := New()\n"
             "+func TestContextBindHeader(t *testing.T) {\n+    c.BindHeader(&h)\n+}\n")
    touched = touched_tests(patch)
    assert touched == {"TestContextBindWithXML", "TestContextBindHeader"}
    base = [{}]  # the package did not build before the fix: no test ran
    gold = [{"TestContextBindHeader": "PASSED", "TestContextBindWithXML": "PASSED", "TestOther": "PASSED",
              "TestTable/sub_case": "PASSED"}]
    assert lists_from_runs(base, gold, touched) == (["TestContextBindHeader", "TestContextBindWithXML"], [], [])
    assert lists_from_runs(base, gold)[0] == list(gold[0])  # Python's rule: every missing test failed
    ran = [{"TestOther": "FAILED"}]  # a test that ran and failed is FAIL_TO_PASS whatever the patch touched
    assert "TestOther" in lists_from_runs(ran, gold, touched)[0]
