"""The real multilingual instances of evals/multilingual/ (issue 22, item 4): the data set reads as tasks,
covers five languages with at least five instances each, every row is what its source says, and the two
bench scripts that rebuild and grade it do what they say on small inputs (no toolchain, no Docker)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from codeagent.data import load_tasks
from codeagent.task import Task

ROOT = Path(__file__).parent.resolve().parent.parent
FOLDER = ROOT / "evals" / "multilingual"
DATASET = FOLDER / "instances.jsonl"
BENCH = ROOT / "bench"
# contract 1: the official SWE-bench parser names these instances use
PARSER_NAMES = {"gotest", "cargo", "tap", "maven", "googletest"}
GIT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return [json.loads(line) for line in DATASET.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH))
    import multilingual_gold_empty
    import multilingual_instances

    yield multilingual_instances, multilingual_gold_empty
    sys.path.remove(str(BENCH))


def test_five_languages_with_five_instances_each(rows):
    tasks = load_tasks(str(DATASET))
    assert [task.instance_id for task in tasks] == [row["instance_id"] for row in rows]
    counts = Counter(row["environment"]["language"] for row in rows)
    assert set(counts) == {"go", "rust", "node", "java", "c/c++"}
    assert min(counts.values()) >= 5, counts


def test_every_row_is_graded_by_a_named_parser_and_has_tests_to_fix(rows):
    for row in rows:
        env = row["environment"]
        assert env["log_parser"] in PARSER_NAMES, row["instance_id"]
        assert env["test_cmd"], row["instance_id"]
        assert row["FAIL_TO_PASS"], row["instance_id"]
        assert not set(row["FAIL_TO_PASS"]) & set(row["PASS_TO_PASS"]), row["instance_id"]
        assert row["patch"].startswith("diff --git") and row["test_patch"].startswith("diff --git")
        task = Task.from_swebench(row)
        assert task.environment == env and task.swebench_repo == row["repo"]
        assert row["instance_id"] == f"{row['repo'].replace('/', '__')}-{row['version']}"


def test_patch_and_test_patch_are_split_by_swebench_rule(rows):
    for row in rows:
        patch_files = [line.split(" b/")[-1] for line in row["patch"].splitlines() if line.startswith("diff --git")]
        test_files = [line.split(" b/")[-1] for line in row["test_patch"].splitlines()
                      if line.startswith("diff --git")]
        assert all("test" not in path for path in patch_files), (row["instance_id"], patch_files)
        assert all("test" in path for path in test_files), (row["instance_id"], test_files)


def test_rows_match_their_sources(rows, bench):
    builder, _ = bench
    sources = {source["instance_id"]: source for source in builder.load_sources()}
    for row in rows:
        source = sources[row["instance_id"]]
        assert row["environment"] == source["environment"]
        assert source["commit"][:7] in row["source"]
    # the official instances' test commands are SWE-bench's (one transcribed here as the check)
    gin = sources["gin-gonic__gin-3741"]["environment"]
    assert gin["test_cmd"] == 'go test -v . -run "^TestColor"' and gin["log_parser"] == "gotest"
    gson = sources["google__gson-2311"]["environment"]["test_cmd"]
    assert gson[0] == "mvn test -B -pl gson -Dtest=com.google.gson.JsonPrimitiveTest#testEqualsIntegerAndBigInteger"


def _repo(tmp_path: Path) -> tuple[Path, str]:
    """A small Go-free git history: a fix commit that changes code and adds a test file."""
    repo = tmp_path / "acme+calc" / "repo"
    work = tmp_path / "work"
    work.mkdir()
    run = lambda *args: subprocess.run(["git", *args], cwd=work, check=True, capture_output=True, env={**GIT, "PATH": "/usr/bin:/bin"})  # noqa: E731
    run("init", "-q")
    (work / "calc.sh").write_text("add() { echo $(( $1 - $2 )); }\n")
    (work / "NOTES.txt").write_bytes(b"add: adds\r\nsub: subtracts\r\n")  # CRLF lines: the patch keeps its CRs
    (work / "run_tests.sh").write_text('. ./calc.sh\n[ "$(add 1 1)" = 0 ] && echo "ok 1 zero" || echo "not ok 1 zero"\n')
    run("add", "-A")
    run("commit", "-qm", "first")
    (work / "calc.sh").write_text("add() { echo $(( $1 + $2 )); }\n")
    (work / "NOTES.txt").write_bytes(b"add: adds (fixed)\r\nsub: subtracts\r\n")
    (work / "run_tests.sh").write_text('. ./calc.sh\n[ "$(add 1 1)" = 2 ] && echo "ok 1 two" || echo "not ok 1 two"\n'
                                       '[ "$(add 0 0)" = 0 ] && echo "ok 2 zero" || echo "not ok 2 zero"\n')
    run("add", "-A")
    run("commit", "-qm", "Fix add (#7)\n\nadd subtracted.")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=work, check=True, capture_output=True,
                            text=True).stdout.strip()
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(repo)], check=True)
    return tmp_path, commit


def test_builder_measures_fail_to_pass_by_running_the_tests(tmp_path, bench):
    builder, _ = bench
    mirrors, commit = _repo(tmp_path)
    sources = tmp_path / "sources.yaml"
    sources.write_text(yaml.safe_dump({
        "repos": {"acme/calc": {"official": False, "environment": {
            "language": "c/c++", "test_cmd": "bash run_tests.sh", "log_parser": "tap"}}},
        "instances": [{"repo": "acme/calc", "number": 7, "commit": commit}]}))
    output = tmp_path / "out.jsonl"
    subprocess.run([sys.executable, str(BENCH / "multilingual_instances.py"), "--mirrors", str(mirrors),
                    "--sources", str(sources), "--output", str(output), "--work", str(tmp_path / "w")],
                   check=True, capture_output=True, cwd=ROOT, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    [row] = [json.loads(line) for line in output.read_text().splitlines()]
    # the test named "two" is new and passes only with the fix; "zero" passed before and after
    assert row["FAIL_TO_PASS"] == ["two"] and row["PASS_TO_PASS"] == ["zero"]
    assert row["instance_id"] == "acme__calc-7" and row["version"] == "7"
    assert row["problem_statement"] == "Fix add (#7)\n\nadd subtracted."
    assert "calc.sh" in row["patch"] and "run_tests.sh" not in row["patch"]
    assert "+add: adds (fixed)\r\n" in row["patch"]
    assert "run_tests.sh" in row["test_patch"]
    # a clone laid out as owner/name works as well as a bare mirror
    clone = tmp_path / "clones" / "acme" / "calc"
    subprocess.run(["git", "clone", "-q", str(mirrors / "acme+calc" / "repo"), str(clone)], check=True)
    found = builder.git_dir(tmp_path / "clones", "acme/calc")
    assert found == clone
    assert builder.describe(found, {"commit": commit[:7]})["test_patch"] == row["test_patch"]
    layout = tmp_path / "repos"
    subprocess.run([sys.executable, str(BENCH / "multilingual_instances.py"), "--mirrors", str(mirrors),
                    "--sources", str(sources), "--layout", str(layout)], check=True, capture_output=True, cwd=ROOT,
                   env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert (layout / "acme" / "calc" / "objects").is_dir()


def test_gold_empty_table_reads_reports_and_rewrites_only_its_part_of_the_readme(tmp_path, bench):
    _, grader = bench
    dataset = tmp_path / "d.jsonl"
    dataset.write_text("".join(json.dumps({"instance_id": i, "environment": {"language": lang}}) + "\n"
                               for i, lang in (("a-1", "go"), ("b-2", "java"), ("c-3", "go"))))
    groups = grader.rows_by_language(dataset, None, None)
    assert groups == {"go": ["a-1", "c-3"], "java": ["b-2"]}
    for lang, which, instance, report in (
            ("go", "gold", "a-1", {"resolved": True, "total_seconds": 12.4}),
            ("go", "empty", "a-1", {"resolved": False, "outcome": "unresolved", "total_seconds": 3}),
            ("go", "gold", "c-3", {"resolved": False, "outcome": "error", "reason": "no tests found",
                                   "f2p_failed": ["TestX"]}),
            ("go", "empty", "c-3", {"resolved": True})):
        folder = tmp_path / "out" / lang / which / "instances" / instance
        folder.mkdir(parents=True)
        (folder / "report.json").write_text(json.dumps(report))
    lines = grader.table(groups, tmp_path / "out")
    assert "| go | a-1 | resolved | unresolved | 12 | 3 |  |" in lines
    assert any(line.startswith("| go | c-3 | error | resolved |") and "no tests found" in line
               and "empty resolves" in line for line in lines)
    assert "| java | b-2 | not run | not run | - | - |  |" in lines
    # an empty patch that errored proves nothing: it is a cause, not an "unresolved"
    errored = tmp_path / "out" / "java" / "empty" / "instances" / "b-2"
    errored.mkdir(parents=True)
    (errored / "report.json").write_text(json.dumps({"resolved": False, "outcome": "harness_error",
                                                     "reason": "the environment could not be built"}))
    again = grader.table(groups, tmp_path / "out")
    assert any(line.startswith("| java | b-2 | not run | harness_error |") and "empty: harness_error" in line
               for line in again)
    assert "- java: gold resolves 0/1, empty graded unresolved 0/1" in again
    assert "- go: gold resolves 1/2, empty graded unresolved 1/2" in lines
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{grader.START}\nstale row\n{grader.END}\nafter\n")
    grader.write_readme(readme, lines)
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith(f"{grader.END}\nafter\n") and "stale row" not in text
    command = grader.grade_command(dataset, ["a-1", "c-3"], "/r", tmp_path / "o", "gold", 1)
    assert command[1:5] == ["-m", "codeagent.cli", "eval", "grade"] and "--gold" in command
    assert command[command.index("--instances") + 1] == "a-1,c-3"
