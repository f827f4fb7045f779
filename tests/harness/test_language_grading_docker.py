"""`codeagent eval grade --gold / --empty` on tasks in Go, Rust, JavaScript (node), Java (maven) and C
(cmake/ctest), through the task environment: each task's repository is tests/data/toolchains/<lang>
with the files of tests/data/language_tasks/<lang>/base/ on top (a bug), committed here; its row in
tests/data/language_tasks/<lang>/task.jsonl carries the gold patch, the test patch that adds a failing
test, the lists and its own `environment` (language, test_cmd, log_parser).

The toolchain and dependency layers are the ones tests/harness/test_toolchains_docker.py builds for the same
files (the same tags: cache hits), and the commits are made with fixed dates, so the instance layers
are built once per machine too."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from codeagent.sandbox.images import image_exists

from ..support.language_tasks import LANGUAGES, make_base

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DATA = Path(__file__).parent.parent / "data"
TOOLCHAINS = {"go": "go 1.19", "rust": "rust", "node": "node/npm >=18", "maven": "java/maven",
              "c": "c/c++/cmake 3.13"}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, base_image) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("language-tasks")
    rows = []
    for lang in LANGUAGES:
        row, commit = make_base(lang, root / "repos")
        rows.append({**row, "base_commit": commit})
    path = root / "tasks.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path, root / "repos"


def grade(dataset: Path, repos: Path, output: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codeagent.cli", "eval", "grade", "--dataset", str(dataset),
                           *flags, "--repos", str(repos), "--output", str(output)],
                          capture_output=True, text=True, timeout=3000, check=False)


def reports(output: Path) -> dict[str, dict]:
    return {path.parent.name: json.loads(path.read_text()) for path in (output / "instances").glob("*/report.json")}


@pytest.fixture(scope="module")
def gold(dataset, tmp_path_factory) -> dict[str, dict]:
    output = tmp_path_factory.mktemp("gold")
    proc = grade(*dataset, output, "--gold")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return reports(output)


@pytest.fixture(scope="module")
def empty(dataset, tmp_path_factory) -> dict[str, dict]:
    output = tmp_path_factory.mktemp("empty")
    proc = grade(*dataset, output, "--empty")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return reports(output)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_gold_resolves_in_the_languages_environment(gold, lang):
    report = gold[f"codeagent-tests__{lang}-calc-1"]
    assert report["outcome"] == "resolved", json.dumps(report, indent=1)[-3000:]
    row = json.loads((DATA / "language_tasks" / lang / "task.jsonl").read_text())
    assert report["language"] == row["environment"]["language"] and report["toolchain"] == TOOLCHAINS[lang]
    assert report["images"]["instance"].startswith("codeagent/lang-instance:")
    assert set(report["fail_to_pass"]) == set(row["FAIL_TO_PASS"]) and report["exit_code"] is not None


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_empty_patch_fails_the_new_test_and_keeps_the_old_one(empty, lang):
    report = empty[f"codeagent-tests__{lang}-calc-1"]
    row = json.loads((DATA / "language_tasks" / lang / "task.jsonl").read_text())
    assert report["outcome"] == "unresolved", json.dumps(report, indent=1)[-3000:]
    assert report["f2p_failed"] == row["FAIL_TO_PASS"] and report["p2p_passed"] == row["PASS_TO_PASS"]
    assert report["consistent"]  # the exit code agrees with the failing test in the log


def test_an_install_that_fails_shows_its_last_lines_and_caches_nothing(dataset, tmp_path):
    """A failed environment build is a harness error whose reason ends with the failing step's output;
    the layer it was building is not committed (the next run builds it again)."""
    path, repos = dataset
    row = json.loads(path.read_text().splitlines()[0])  # go
    row["environment"] = {**row["environment"], "install": ["echo fetching", "echo codeagent-install-broke; exit 7"]}
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(row) + "\n")
    proc = grade(broken, repos, tmp_path / "out", "--gold")
    report = reports(tmp_path / "out")[row["instance_id"]]
    assert report["outcome"] == "harness_error" and report["language"] == "go", proc.stderr[-2000:]
    first, *rest = report["reason"].splitlines()
    assert first.startswith("the environment could not be built: building codeagent/lang-instance:")
    assert first.endswith(" failed: the instance step: codeagent-install-broke")  # what a one-line report shows
    assert rest[:3] == ["exit code 7:", "fetching", "codeagent-install-broke"]  # the step's last lines
    tag = re.search(r"building (codeagent/lang-instance:\w+) failed", report["reason"]).group(1)
    assert not image_exists(tag)


def test_a_patch_that_stops_the_tests_from_running_is_a_failure_for_training(dataset, tmp_path):
    """A patch that deletes go.mod leaves a log in no format of the parser: a harness error for the
    report, marked `log_format_unknown`, which training scores as a failure instead of leaving it out
    (left out, breaking the environment would dodge a failing reward)."""
    from codeagent.train.grpo.rollout_results import infrastructure_failure

    path, repos = dataset
    row = json.loads(path.read_text().splitlines()[0])  # go
    go_mod = (DATA / "toolchains" / "go" / "go.mod").read_text().splitlines()
    row["patch"] = ("diff --git a/go.mod b/go.mod\ndeleted file mode 100644\n--- a/go.mod\n+++ /dev/null\n"
                    f"@@ -1,{len(go_mod)} +0,0 @@\n" + "".join(f"-{line}\n" for line in go_mod))
    breaking = tmp_path / "breaking.jsonl"
    breaking.write_text(json.dumps(row) + "\n")
    proc = grade(breaking, repos, tmp_path / "out", "--gold")
    report = reports(tmp_path / "out")[row["instance_id"]]
    assert report["outcome"] == "harness_error" and report["log_format_unknown"], proc.stderr[-2000:] + str(report)
    assert infrastructure_failure("submitted", report["outcome"], report) is None
    assert infrastructure_failure("submitted", "harness_error", {"reason": "the engine went away"})


@pytest.mark.usefixtures("no_leaks")
def test_the_agents_sandbox_has_the_toolchain_offline_and_the_rollout_grader_grades_there(dataset):
    """What `eval run` and GRPO rollouts open (harness/env_sandbox.py): the instance image, no network;
    GRPO's sandbox grader grades a patch in a fresh one with the spec's command and parser."""
    from codeagent.harness.env_grade import grade_in_sandbox
    from codeagent.harness.env_images import LanguageImages, image_source
    from codeagent.harness.env_sandbox import agent_sandboxes
    from codeagent.task import Task

    path, repos = dataset
    row = json.loads(path.read_text().splitlines()[0])  # go
    task = Task.from_swebench(row, repo=str(repos / row["repo"]))
    assert isinstance(image_source(task), LanguageImages)
    sandboxes = agent_sandboxes(task)
    with sandboxes.open() as box:
        result = box.run("go version && go test ./... && (getent hosts proxy.golang.org || echo no-network)", timeout=300)
        assert result.exit_code == 0 and "ok" in result.output and "no-network" in result.output, result.output
        box.write_file("sub.go", b"package calc\n\n// Sub returns a minus b.\nfunc Sub(a, b int) int { return a - b }\n")
        patch = box.diff()
    with sandboxes.open() as fresh:
        graded = grade_in_sandbox(fresh, task, patch, harness=True)
    assert graded["outcome"] == "resolved", graded


def test_the_toolchain_version_the_spec_asks_for_is_installed(dataset, tmp_path):
    """go.mod says 1.19 (Debian's Go); the task's spec asks for 1.22: the toolchain layer installs it from the
    Go module proxy (the layer tests/harness/test_toolchains_docker.py builds for a go.mod that states 1.22)."""
    path, repos = dataset
    row = json.loads(path.read_text().splitlines()[0])  # go
    row["environment"] = {**row["environment"], "toolchain_version": "1.22", "test_cmd": ["go version", "go test -v ./..."]}
    (tmp_path / "go122.jsonl").write_text(json.dumps(row) + "\n")
    proc = grade(tmp_path / "go122.jsonl", repos, tmp_path / "out", "--gold")
    report = reports(tmp_path / "out")[row["instance_id"]]
    assert report["outcome"] == "resolved" and report["toolchain"] == "go 1.22", proc.stderr[-2000:]
    log = (tmp_path / "out" / "instances" / row["instance_id"] / "test_output.txt").read_text()
    assert "go version go1.22.0 linux/" in log
