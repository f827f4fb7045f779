"""Language environment specs (harness/specs/languages.py, contract 2): files in evals/environments/languages/,
resolved defaults < version < the task's own `environment`; the plan's test script; which image source
a task gets (env_images.image_source)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from codeagent.harness.env_images import BuiltImages, LanguageImages, PulledImages, image_source
from codeagent.harness.grading.plan import language_command, language_plan
from codeagent.harness.specs import languages as lang_specs
from codeagent.harness.specs.languages import SpecError, language_spec_for, load_language_specs
from codeagent.task import Task

GIN = """
repo: gin-gonic/gin
language: go
defaults:
  toolchain_version: "1.22.4"
  install: [go mod download]
  test_cmd: go test -v ./...
  log_parser: pytest
versions:
  3741: {test_env: {CGO_ENABLED: "0"}}
  "3820": {toolchain_version: "1.23.8", test_cmd: [go vet ./..., go test -v ./...], test_timeout: 600}
"""


@pytest.fixture
def specs(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "languages"
    folder.mkdir()
    (folder / "gin-gonic__gin.yaml").write_text(GIN)
    (folder / "_split.yaml").write_text("not: a repository file\n")
    monkeypatch.setattr(lang_specs, "language_dir", lambda: folder)
    return folder


def task(version: str | None = "3741", repo: str = "gin-gonic/gin", **extra) -> Task:
    return Task(repo=f"https://github.com/{repo}.git", problem_statement="x", version=version, instance_id="t-1",
                extra=extra)


def test_a_version_layers_over_the_defaults_and_the_tasks_own_environment_over_both(specs):
    spec = language_spec_for(task("3820"))
    assert (spec.language, spec.toolchain_version, spec.test_cmds, spec.test_timeout, spec.install) == \
        ("go", "1.23.8", ["go vet ./...", "go test -v ./..."], 600, ["go mod download"])
    assert spec.layers == ["gin-gonic__gin.yaml: defaults", "gin-gonic__gin.yaml: versions.3820"]
    spec = language_spec_for(task("3741"))  # an unquoted YAML version is its text
    assert spec.test_env == {"CGO_ENABLED": "0"} and spec.test_cmds == ["go test -v ./..."] and spec.test_timeout == 1800
    own = language_spec_for(task("3741", environment={"toolchain_version": "1.21", "install": []}))
    assert own.toolchain_version == "1.21" and own.install == [] and own.test_env == {"CGO_ENABLED": "0"}
    assert own.layers[-1] == "task t-1: environment"
    assert set(load_language_specs()) == {"gin-gonic/gin"}


def test_which_tasks_are_language_tasks(specs):
    assert language_spec_for(task(repo="psf/requests")) is None  # Python: as before
    assert language_spec_for(task(repo="psf/requests", environment={"python": "3.9"})) is None
    mined = Task(repo="/some/where/calc", problem_statement="x", extra={"environment": json.dumps(
        {"language": "rust", "test_cmd": "cargo test", "log_parser": "pytest"})})
    spec = language_spec_for(mined)
    assert (spec.language, spec.install, spec.test_cmds) == ("rust", None, ["cargo test"])
    mirrored = Task(repo="/mirrors/gin-gonic/gin", problem_statement="x", version="3741",
                    extra={"swebench_repo": "gin-gonic/gin"})  # a dataset row read with --repos
    assert language_spec_for(mirrored).repo == "gin-gonic/gin"


def test_a_mined_task_on_a_repository_with_a_spec_takes_nothing_from_it(specs):
    """A mined axios task took the official file's defaults: its pre_install (corepack from the npm registry)
    ran in the offline instance step and every candidate failed to build; the file's `install` would run the
    mined repository's own code with network."""
    mined = task("1.22.12", environment={"language": "go", "test_cmd": "go test -json ./...", "log_parser": "go_json",
                                        "toolchain_version": "1.22.12", "repo_spec": False})
    spec = language_spec_for(mined)
    assert (spec.install, spec.pre_install, spec.test_cmds, spec.log_parser, spec.toolchain_version) == \
        (None, [], ["go test -json ./..."], "go_json", "1.22.12")
    assert spec.layers == ["task t-1: environment"]


def test_a_version_without_a_spec_names_the_file_and_the_known_versions(specs):
    with pytest.raises(SpecError, match=r"gin-gonic/gin: no environment spec for version '9999' in .*gin-gonic__gin\.yaml "
                                        r"\(known: 3741, 3820\)"):
        language_spec_for(task("9999"))
    carried = language_spec_for(task("9999", environment={"language": "go", "test_cmd": "go test ./..."}))
    assert carried.test_cmds == ["go test ./..."] and carried.log_parser == "pytest"  # the task carries its own


def test_an_unknown_language_lists_the_known_toolchains(specs):
    with pytest.raises(SpecError, match=r"task t-1: environment: unknown language 'zig' \(known toolchains: go, rust, "
                                        r"node, java, c/c\+\+\)"):
        language_spec_for(task(repo="a/b", environment={"language": "zig", "test_cmd": "x", "log_parser": "pytest"}))
    (specs / "a__c.yaml").write_text("repo: a/c\nlanguage: cobol\n")
    with pytest.raises(SpecError, match=r"a__c\.yaml: unknown language 'cobol'"):
        load_language_specs()


def test_an_unknown_log_parser_or_an_unset_test_command_is_refused(specs):
    with pytest.raises(SpecError, match=r"unknown log_parser 'no-such-parser' \(known: .*pytest"):
        language_spec_for(task(environment={"log_parser": "no-such-parser"}))
    assert language_spec_for(task(environment={"log_parser": "parse_log_pytest"})).log_parser == "pytest"
    with pytest.raises(SpecError, match=r"a/b None: task t-1: environment leave log_parser unset"):
        language_spec_for(task(None, repo="a/b", environment={"language": "go", "test_cmd": "go test"}))


@pytest.mark.parametrize("text, says", [
    ("repo: x/y\nlanguage: go\nversions:\n  '1': {pip_packages: [a]}\n", r"x__y\.yaml: versions\.1\.pip_packages: Extra inputs"),
    ("repo: x/y\nlanguage: go\ndefaults: {toolchain_version: 1.20}\n", r"toolchain_version: Value error, .*quote it"),
    ("repo: x/y\nlanguage: go\nversions: {1.10: {}}\n", r"version 1\.1 must be a string"),
    ("repo: other/name\nlanguage: go\n", r"says repo 'other/name', but its name says 'x/y'"),
    ("repo: x/y\nlanguage: go\ndefaults: {test_timeout: 0}\n", r"defaults\.test_timeout: Input should be greater than 0"),
    ("- a list\n", r"x__y\.yaml: expected a mapping"),
])
def test_a_malformed_file_names_itself_and_the_field(specs, text, says):
    (specs / "x__y.yaml").write_text(text)
    with pytest.raises(SpecError, match=says):
        load_language_specs()


def test_a_malformed_file_fails_its_own_tasks_only(specs):
    (specs / "x__y.yaml").write_text("repo: x/y\nlanguage: go\nbogus: 1\n")
    assert isinstance(image_source(task(repo="psf/requests")), BuiltImages)
    source = image_source(task(repo="x/y"))
    assert isinstance(source, LanguageImages) and source.facts() == {"language": ""}
    with pytest.raises(SpecError, match="bogus: Extra inputs"):
        source.plan()


def test_the_image_source_of_a_task(specs):
    assert type(image_source(task(repo="psf/requests"))) is BuiltImages
    source = image_source(task("3820"))
    assert type(source) is LanguageImages and not source.pulled and source.sandbox_grades and source.services == []
    assert source.facts() == {"language": "go", "toolchain_version": "1.23.8", "log_parser": "pytest",
                              "toolchain_fallback": False}
    rust = image_source(task(repo="a/b", environment={"language": "rust", "toolchain_version": "1.81",
                                                      "test_cmd": "cargo test", "log_parser": "pytest"}))
    assert rust.facts()["toolchain_fallback"] is True  # Debian's rustc: no recipe installs another
    pulled = task("3820", images={"source": "official"})
    assert type(image_source(pulled)) is PulledImages  # a pulled image wins, as for Python


def run_script(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"( {command} )"], capture_output=True, text=True, check=False)


def spec_of(*commands: str, **fields) -> SimpleNamespace:
    return SimpleNamespace(test_env=fields.get("test_env", {}), pre_test=fields.get("pre_test", []),
                           test_cmds=list(commands), log_parser="pytest", test_timeout=60)


def test_every_test_command_runs_and_the_exit_code_is_the_last_ones_under_pipefail():
    ran = run_script(language_command(spec_of("echo one; false", "echo two", pre_test=["echo pre"],
                                              test_env={"WHO": "it's me"})))
    assert ran.stdout.split() == ["pre", "one", "two"] and ran.returncode == 0
    ran = run_script(language_command(spec_of("echo $WHO", "false | cat", test_env={"WHO": "it's me"})))
    assert ran.stdout == "it's me\n" and ran.returncode == 1  # pipefail: the failing test runner, not `cat`


def test_the_plan_of_a_language_task(specs):
    spec = language_spec_for(task("3820"))
    plan = language_plan(task("3820").model_copy(update={"FAIL_TO_PASS": ["TestA"], "test_patch": "diff"}), spec)
    assert plan.command == "set -x -o pipefail\ngo vet ./...\ngo test -v ./..." and plan.timeout == 600.0
    assert (plan.log_parser, plan.fail_to_pass, plan.test_patch) == ("pytest", ["TestA"], "diff")
    own = task("3820").model_copy(update={"test_command": "go test -run TestA ./..."})
    assert language_plan(own, spec).command == "go test -run TestA ./..."  # the task's own command wins, as for Python
