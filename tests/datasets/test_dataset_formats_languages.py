"""The multilingual task formats (issue 22): SWE-bench Multilingual, Multi-SWE-bench and SWE-PolyBench
rows into Task, told apart from the others, bad rows named. CPU only, no Docker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codeagent.data import FORMATS, TaskFormatError, detect_format, load_tasks, read_rows
from codeagent.data.swebench import registry

DATA = Path(__file__).parent.parent / "data" / "datasets"
MULTILINGUAL, MULTI_SWE, POLYBENCH = (DATA / name for name in
                                      ("swebench_multilingual.jsonl", "multi_swe_bench.jsonl", "swe_polybench.jsonl"))


def rows(path: Path) -> list[dict]:
    return read_rows(path)


def write(path: Path, rows_: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows_))
    return path


def test_the_three_formats_are_registered_and_told_apart_from_their_rows():
    assert {"swebench-multilingual", "multi-swe-bench", "swe-polybench"} <= set(FORMATS)
    assert {detect_format(row) for row in rows(MULTILINGUAL)} == {"swebench-multilingual"}
    assert {detect_format(row) for row in rows(MULTI_SWE)} == {"multi-swe-bench"}
    assert {detect_format(row) for row in rows(POLYBENCH)} == {"swe-polybench"}
    python = {**rows(MULTILINGUAL)[0], "repo": "psf/requests", "instance_id": "psf__requests-1"}
    assert detect_format(python) == "swebench"  # a Python SWE-bench row is read as before


def test_swebench_multilingual_rows_carry_repository_and_version_to_the_language_spec():
    gin, tokio = load_tasks(MULTILINGUAL)
    assert gin.task_format == "swebench-multilingual"
    assert (gin.swebench_repo, gin.version) == ("gin-gonic/gin", "1805")
    assert (tokio.swebench_repo, tokio.version) == ("tokio-rs/tokio", "6724")
    assert gin.repo == "https://github.com/gin-gonic/gin.git"
    assert gin.FAIL_TO_PASS == ["TestRouteRedirectTrailingSlash"]  # a JSON string in the row
    assert tokio.PASS_TO_PASS == ["write_all_buf", "write_buf_err"]
    assert gin.gold_patch.startswith("diff --git a/tree.go") and gin.test_patch
    assert [task.instance_id for task in load_tasks(MULTILINGUAL, "swebench-multilingual")] == [
        "gin-gonic__gin-1805", "tokio-rs__tokio-6724"]


def test_the_multilingual_split_is_a_named_data_set():
    spec = registry()["multilingual"]
    assert (spec.hf, spec.split) == ("SWE-bench/SWE-bench_Multilingual", "test")


def test_multi_swe_bench_rows_become_tasks():
    cli, jackson = load_tasks(MULTI_SWE)
    assert cli.instance_id == "cli__cli-3519"  # no instance_id in the row: org__repo-number
    assert jackson.instance_id == "fasterxml__jackson-core-1016"
    assert cli.repo == "https://github.com/cli/cli.git"
    assert cli.base_commit == "5ec0fce2d9b3a4ee3d1a6c2e6e6c3c9b2c1e7a10"
    assert cli.FAIL_TO_PASS == ["TestPRView_jsonFields", "TestPRView_nontty", "TestPRView_jsonNoFields"]
    assert cli.PASS_TO_PASS == ["TestPRView_Preview", "TestPRView_web"]
    assert cli.problem_statement == "gh pr view --json panics\n\nRunning `gh pr view --json` with no fields panics."
    assert jackson.problem_statement == "JsonFactory should allow a custom BufferRecycler pool"
    assert cli.gold_patch.startswith("diff --git a/pkg/cmd/pr/view/view.go") and cli.test_patch
    assert cli.task_format == "multi-swe-bench" and cli.swebench_repo == "cli/cli"
    assert cli.version == "3519"  # the pull request, as SWE-bench Multilingual's versions are
    assert jackson.extra["multi_swe_bench"] == {"image": "mswebench/fasterxml_m_jackson-core:pr-1016",
                                                "workdir": "/home/jackson-core", "base_ref": "2.16"}
    assert jackson.docker_image is None  # its image is not one codeagent runs (SWE-bench's layout)
    assert cli.extra["test_statuses"]["s2p_tests"] == {"TestPRView_nontty": {"run": "SKIP", "test": "SKIP",
                                                                             "fix": "PASS"}}


def test_swe_polybench_rows_become_tasks_with_their_own_environment():
    gson, keras = load_tasks(POLYBENCH)
    assert gson.task_format == "swe-polybench" and gson.extra["language"] == "Java"
    assert gson.FAIL_TO_PASS == ["com.google.gson.functional.FieldNamingTest#testUpperCaseWithUnderscores"]
    assert len(gson.PASS_TO_PASS) == 2  # a Python literal with single quotes
    assert gson.test_command == "mvn test -B -pl gson -Dtest=com.google.gson.functional.FieldNamingTest"
    # the task's own spec: google/gson also has a Multilingual spec, whose versions are other instances
    assert gson.environment == {"language": "java", "test_cmd": gson.test_command}
    assert gson.extra["dockerfile"].startswith("FROM polybench_java_base")
    assert gson.extra["modified_nodes"][0].startswith("gson/src/main/java/com/google/gson/FieldNamingPolicy.java")
    assert gson.extra["task_category"] == "Feature"
    assert keras.environment is None and keras.extra["language"] == "Python"  # Python: as before
    assert keras.PASS_TO_PASS == [] and keras.test_command.startswith("pytest")


@pytest.mark.parametrize("source, change, message", [
    (MULTI_SWE, lambda row: row.pop("base"), r"task 1: missing field 'base'"),
    (MULTI_SWE, lambda row: row["base"].pop("sha"), r"task 1: missing or empty field 'base.sha'"),
    (MULTI_SWE, lambda row: row.update(resolved_issues=[]), r"task 1: missing or empty field 'resolved_issues'"),
    (MULTI_SWE, lambda row: row.update(f2p_tests={}, s2p_tests={}, n2p_tests={}), r"task 1: no test to fix"),
    (MULTI_SWE, lambda row: row.update(p2p_tests=["a"]), r"task 1: missing field 'p2p_tests'"),
    (MULTI_SWE, lambda row: row.update(number="x"), r"task 1: missing or bad field 'number'"),
    (POLYBENCH, lambda row: row.update(F2P="['a', "), r"task 1: field 'F2P' is not a list of test names"),
    (POLYBENCH, lambda row: row.pop("test_command"), r"task 1: missing or empty field 'test_command'"),
    (MULTILINGUAL, lambda row: row.pop("version"), r"task 1: missing or empty field 'version'"),
    (MULTILINGUAL, lambda row: row.pop("base_commit"), r"task 1: missing field 'base_commit'"),
])
def test_a_bad_row_is_an_error_naming_the_row_and_the_field(tmp_path, source, change, message):
    bad = rows(source)
    change(bad[0])
    path = write(tmp_path / source.name, bad)
    with pytest.raises(TaskFormatError, match=message):
        load_tasks(path, {MULTI_SWE: "multi-swe-bench", POLYBENCH: "swe-polybench",
                          MULTILINGUAL: "swebench-multilingual"}[source])
