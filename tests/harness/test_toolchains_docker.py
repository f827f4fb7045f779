"""The sandbox has the repository's toolchain: detected from its files (languages/*.yaml
`toolchain:`), built once as a layer on the base image, used by `sandbox run` and `solve`.
Real Docker, real Debian toolchains: each language's layer is built once per machine (cached by
content hash), so only the first run of this module is slow."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from codeagent.harness.specs.toolchains import Toolchain
from codeagent.harness.toolchain import detect as toolchain_detect
from codeagent.harness.toolchain import resolve as env_toolchain
from codeagent.harness.toolchain.resolve import detect, resolve
from codeagent.harness.toolchain.test_command import human_test_command
from codeagent.sandbox import snapshot
from codeagent.sandbox.images import image_exists

from ..support.git import git
from ..support.toolchains import toolchain_repo


@pytest.mark.parametrize("name, toolchain, version, test_command", [
    ("go", "go", "1.19", "go test ./..."),
    ("rust", "rust", "", "cargo test --workspace"),
    ("node", "node/npm", ">=18", "npm test"),
    ("maven", "java/maven", "17", "mvn -o test"),
    ("c", "c/c++/make", "", "make test"),
])
def test_detected_from_the_repositorys_files(tmp_path, name, toolchain, version, test_command):
    found = detect(snapshot(toolchain_repo(name, tmp_path)))
    assert found is not None and found.label == f"{toolchain} {version}".strip()
    assert human_test_command(found) == test_command


def test_a_makefile_alone_is_not_c_and_python_stays_on_the_base_image(make_repo):
    assert detect(snapshot(make_repo({"Makefile": "all:\n\ttrue\n", "setup.py": ""}))) is None
    found = detect(snapshot(make_repo({"Makefile": "test:\n\tcc -o t t.c && ./t\n", "t.c": "int main(){}"})))
    assert found is not None and found.toolchain.name == "c/c++" and human_test_command(found) == "make test"
    environment = resolve(snapshot(make_repo({"main.py": ""})), base="codeagent/base:x", build=False)
    assert environment.image is None and environment.line.startswith("environment: python")


def test_sandbox_image_from_the_config_wins(tmp_path):
    environment = resolve(snapshot(toolchain_repo("go", tmp_path)), "my/image:1", build=False)
    assert environment.image == "my/image:1" and "sandbox.image" in environment.line


def cli(*args: str, cwd: Path, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codeagent.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize("name, says, version_command, answer", [
    ("go", "environment: go 1.19 (go.mod)", "go version", "go version go1."),
    ("rust", "environment: rust (Cargo.toml)", "cargo --version", "cargo 1."),
    ("node", "environment: node/npm >=18 (package.json)", "node --version", "v2"),  # the newest LTS it allows
    ("maven", "environment: java/maven 17 (pom.xml)", "mvn -v", "Apache Maven"),
    ("c", "environment: c/c++/make (Makefile)", "gcc --version", "gcc (Debian"),
])
def test_sandbox_run_has_the_toolchain_and_passes_the_repositorys_tests(tmp_path, name, says, version_command,
                                                                          answer):
    repo = toolchain_repo(name, tmp_path)
    test_command = human_test_command(detect(snapshot(repo)))
    proc = cli("sandbox", "run", "--repo", str(repo), "--", f"{version_command} && {test_command}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    line = next(line for line in proc.stderr.splitlines() if line.startswith("environment:"))
    assert line.startswith(says) and ", image codeagent/lang-" in line
    assert answer in proc.stdout


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_a_toolchain_that_cannot_be_set_up_says_what_is_missing_and_runs_on_the_base_image(make_repo, monkeypatch):
    broken = Toolchain(name="zig", order=0, detect=("build.zig",), packages=("codeagent-no-such-package",))
    monkeypatch.setattr(toolchain_detect, "toolchains", lambda: (broken,))
    snap = snapshot(make_repo({"build.zig": ""}))
    environment = resolve(snap)
    assert environment.image is None and environment.missing
    assert "the zig toolchain could not be set up" in environment.line and "sandbox.image" in environment.line
    assert not image_exists(env_toolchain.toolchain_layer(environment.detected, resolve_base()).tag)  # nothing half-built


def resolve_base() -> str:
    from codeagent.sandbox.images import base_image_tag

    return base_image_tag()


@pytest.mark.docker
@pytest.mark.slow
def test_solve_says_which_environment_it_chose(tmp_path, server):
    repo = toolchain_repo("go", tmp_path)
    env = {**os.environ, "CODEAGENT_TRAJECTORY_DIR": str(tmp_path / "trajs"),
           "CODEAGENT_CONFIG": str(tmp_path / "no-user-config.yaml")}
    proc = cli("solve", "--repo", str(repo), "--issue", "make Add handle overflow", "--model", "hosted_vllm/served",
               "--api-base", server.base, cwd=tmp_path, env=env, timeout=600)
    assert "codeagent · environment: go 1.19 (go.mod) on codeagent/base:" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_the_sandbox_solve_opens_has_the_toolchain(tmp_path):
    from codeagent.config import Config
    from codeagent.run.repo_env import with_repository_environment
    from codeagent.sandbox import open_sandbox, sandbox_options

    repo, said = toolchain_repo("go", tmp_path), []
    config = with_repository_environment(Config(), str(repo), None, said.append)
    assert config.sandbox.image.startswith("codeagent/lang-") and said[-1].startswith("environment: go 1.19")
    with open_sandbox(snapshot(repo), **sandbox_options(config.sandbox)) as box:
        result = box.run("go test ./...")
    assert result.exit_code == 0 and "ok" in result.output


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize(("stated", "installed"), [("1.22", "go1.22.0"), ("1.20", "go1.21.0")])
def test_the_go_version_go_mod_states_is_installed_from_the_go_module_proxy(tmp_path, stated, installed):
    """A version before 1.21 (the oldest the proxy serves as a module) gets 1.21.0, not Debian's older Go
    or no Go at all (go 1.20 was refused by the proxy: every tool ran without go)."""
    repo = toolchain_repo("go", tmp_path)
    (repo / "go.mod").write_text(f"module example.com/calc\n\ngo {stated}\n")
    git(repo, "commit", "-qam", f"go {stated}")
    proc = cli("sandbox", "run", "--repo", str(repo), "--", "go version && go test ./...", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"environment: go {stated} (go.mod)" in proc.stderr and f"go version {installed} " in proc.stdout


@pytest.mark.docker
def test_no_base_image_is_the_sandboxs_own_one_line(tmp_path):
    from codeagent.sandbox import ImageMissing

    with pytest.raises(ImageMissing, match="codeagent sandbox build"):
        resolve(snapshot(toolchain_repo("go", tmp_path)), base="codeagent/base:no-such-suite-000000000000")


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_the_tui_session_s_sandbox_has_the_toolchain_and_says_so(tmp_path):
    """The interactive session (the TUI's and ACP's) opens its sandbox in the repository's environment too."""
    from ..support.scripted import call
    from ..support.session import Recorder, make_session

    repo, recorder = toolchain_repo("go", tmp_path), Recorder()
    session, _ = make_session(repo, [call("bash", command="go version && go test ./..."), call("submit")],
                              tmp_path, recorder, mode="full-auto")
    try:
        session.submit("Run the tests.")
        assert session.wait_idle(300)
    finally:
        session.close()
    assert any(text.startswith("environment: go 1.19 (go.mod)") for text in recorder.notices()), recorder.notices()
    outputs = " ".join(str(getattr(event, "output", "")) for event in recorder.events)
    assert "go version go1." in outputs and "ok" in outputs, outputs[-2000:]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize("name, test", [("go", "TestAdd"), ("rust", "adds"), ("node", "adds"), ("maven", "adds"),
                                        ("c", "make test")])
def test_the_test_report_prints_what_its_parser_reads_offline_in_the_toolchain_sandbox(tmp_path, name, test):
    """Contract 3: the repository's graded test command, run where the agent runs (no network)."""
    from codeagent.harness.logs.parsers import parse_log
    from codeagent.harness.toolchain.resolve import test_report
    from codeagent.sandbox import open_sandbox

    snap = snapshot(toolchain_repo(name, tmp_path))
    report = test_report(snap)
    assert report is not None
    with open_sandbox(snap, image=resolve(snap).image) as box:
        result = box.run(report.command, timeout=600)
    statuses = parse_log(report.log_parser, result.output)
    assert statuses and set(statuses.values()) == {"PASSED"}, result.output[-2000:]
    assert any(test in found for found in statuses), statuses


@pytest.mark.parametrize(("wrapper", "maven"), [(None, "3.9"), ("3.9.6", "3.9.6")])
def test_maven_is_the_version_its_wrapper_states_else_the_newest_3_9(tmp_path, wrapper, maven):
    """Debian's Maven (3.8) was the only one: every pom whose enforcer requires 3.9 (Apache's parent poms)
    failed before a test ran."""
    repo = toolchain_repo("maven", tmp_path)
    if wrapper:
        (repo / ".mvn" / "wrapper").mkdir(parents=True)
        (repo / ".mvn" / "wrapper" / "maven-wrapper.properties").write_text(
            "distributionUrl=https://repo.maven.apache.org/maven2/org/apache/maven/apache-maven/"
            f"{wrapper}/apache-maven-{wrapper}-bin.zip\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "wrapper")
    found = detect(snapshot(repo))
    assert found is not None and found.variant is not None and found.variant.name == "maven"
    assert found.pm_version == maven


ENFORCER = """<plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-enforcer-plugin</artifactId>
        <version>3.5.0</version>
        <executions><execution><id>enforce-maven-version</id><goals><goal>enforce</goal></goals>
          <configuration><rules><requireMavenVersion><version>[3.9,)</version></requireMavenVersion></rules></configuration>
        </execution></executions>
      </plugin>
      <plugin>"""


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_a_pom_whose_enforcer_requires_maven_3_9_runs_its_tests_at_the_first_try(tmp_path):
    """apache/commons-cli's parent pom requires Maven 3.9: with Debian's 3.8.7 its enforcer stopped the build
    and no test ran (`sandbox run --repo` found none)."""
    repo = toolchain_repo("maven", tmp_path)
    pom = repo / "pom.xml"
    pom.write_text(pom.read_text().replace("<plugin>", ENFORCER, 1))
    git(repo, "commit", "-qam", "requires Maven 3.9")
    proc = cli("sandbox", "run", "--repo", str(repo), cwd=tmp_path)
    assert "tests: 1 passed (read as junit_xml)" in proc.stderr, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "(from Maven Central)" in next(line for line in proc.stderr.splitlines() if line.startswith("environment:"))


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_what_the_image_built_is_not_built_again_in_the_sandbox_and_a_changed_file_is(tmp_path):
    """The build layer compiled the tree; a sandbox on the same files found every target stale (each tracked
    file touched newer than the build: magic_enum recompiled 24 of 24 objects in its first test run), and a
    file that differs from the one the build compiled must still be rebuilt."""
    repo = toolchain_repo("c", tmp_path)
    probe = "make -q calc_test && echo UP-TO-DATE || echo STALE"
    proc = cli("sandbox", "run", "--repo", str(repo), "--", probe, cwd=tmp_path)
    assert "UP-TO-DATE" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    calc = repo / "calc.c"
    calc.write_text(calc.read_text() + "\n/* changed after the image was built */\n")
    git(repo, "commit", "-qam", "a change the build layer (keyed by the Makefile) has not seen")
    proc = cli("sandbox", "run", "--repo", str(repo), "--", probe, cwd=tmp_path)
    assert "STALE" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_each_maven_module_s_test_runner_is_fetched_by_the_build(tmp_path):
    """google/gson: the build ran one test class, the first found, which was another module's; Surefire fetches a
    module's provider only when it runs a test there, so every graded run of gson's own module (JUnit 4) failed
    offline for want of surefire-junit4. Here one module needs JUnit 4's provider and the other JUnit 5's."""
    repo = toolchain_repo("maven-modules", tmp_path)
    proc = cli("sandbox", "run", "--repo", str(repo), cwd=tmp_path)
    assert "tests: 2 passed (read as junit_xml)" in proc.stderr, proc.stdout[-3000:] + proc.stderr[-2000:]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_a_cmake_project_s_own_test_switch_submodule_googletest_and_catch2_3_run_at_the_first_try(tmp_path):
    """As spdlog, utfcpp and snappy are: the tests behind `option(X_BUILD_TESTS ... OFF)` (none were built),
    the benchmarks on by default from a submodule the snapshot lacks, GoogleTest as a submodule (both empty:
    the configure step failed), and `find_package(Catch2 3)` (Debian bookworm's catch2 is 2.13)."""
    repo = toolchain_repo("cmake", tmp_path)
    for path in ("third_party/benchmark", "third_party/googletest"):  # gitlinks, as a clone without --recursive
        git(repo, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},{path}")
    git(repo, "commit", "-qm", "submodules")
    proc = cli("sandbox", "run", "--repo", str(repo), cwd=tmp_path)
    assert "tests: 2 passed (read as junit_xml)" in proc.stderr, proc.stdout[-3000:] + proc.stderr[-2000:]


def test_a_plugin_named_without_a_version_is_fetched_by_the_resolver_and_a_hostile_name_is_not():
    """stleary/JSON-java: the `bundle` packaging binds plugins the poms name without a version; offline, Maven
    cannot read the version from metadata that was never fetched, and no rule knew that message; gson's
    annotation processor (error_prone_core), which go-offline does not see, named in a list of its own, and its proto
    module's protoc, an artifact with a classifier."""
    from codeagent.harness.specs.toolchains import toolchains
    from codeagent.harness.toolchain.deps import missing_in

    needs = missing_in(next(tool for tool in toolchains() if tool.name == "java"))
    output = ("[ERROR] Error resolving version for plugin 'org.apache.felix:maven-bundle-plugin' from the repositories "
              "[local (/root/.m2/repository), central (https://repo.maven.apache.org/maven2)]: Plugin not found in any "
              "plugin repository -> [Help 1]\n[ERROR] Plugin org.example:x:1.0 or one of its dependencies could not be "
              "resolved: The following artifacts could not be resolved: org.example:y:jar:2.1 (absent): "
              "Cannot access central in offline mode and the artifact org.example:y:jar:2.1 has not been downloaded "
              "from it before.\n[ERROR] Error resolving version for plugin 'a;touch /pwned:b' from the repositories\n"
              "[ERROR] Failed to execute goal org.apache.maven.plugins:maven-compiler-plugin:3.10.1:compile (default-compile)"
              " on project gson: Resolution of annotationProcessorPath dependencies failed: Missing:\n[ERROR] ----------\n"
              "[ERROR] 1) com.google.errorprone:error_prone_core:jar:2.18.0\n[ERROR] \n"
              "[ERROR] Failed to execute goal org.xolstice.maven.plugins:protobuf-maven-plugin:0.6.1:test-compile (default) "
              "on project proto: Unable to resolve artifact: Missing:\n[ERROR] ----------\n"
              "[ERROR] 1) com.google.protobuf:protoc:exe:linux-x86_64:3.17.3\n[ERROR] \n")
    assert needs(output) == [
        "mvn -B -q dependency:get -Dartifact=com.google.errorprone:error_prone_core:2.18.0:jar || true",
        "mvn -B -q dependency:get -Dartifact=com.google.protobuf:protoc:3.17.3:exe:linux-x86_64 || true",
        "mvn -B -q dependency:get -Dartifact=org.apache.felix:maven-bundle-plugin:RELEASE:maven-plugin || true; "
        "mvn -B -q org.apache.maven.plugins:maven-help-plugin:3.5.2:describe -Dplugin=org.apache.felix:maven-bundle-plugin"
        " || true",
        "mvn -B -q dependency:get -Dartifact=org.example:y:2.1:jar || true"]


def test_a_build_that_names_one_more_missing_artifact_each_round_gets_every_one(tmp_path):
    """jhy/jsoup's offline build named what it lacked one at a time, four rounds: its dependencies, two API
    signatures, then Surefire's provider; after three rounds the provider was never fetched and no test ran."""
    from codeagent.harness.layers.layer import Layer, LayerNeeds
    from codeagent.harness.toolchain.deps import missing_layer, with_missing

    found = detect(snapshot(toolchain_repo("maven", tmp_path)))
    lacking, builds = [f"mvn dependency:get -Dartifact=g:a{n}:1:jar" for n in range(5)], []

    def build(layer: Layer) -> bytes:
        if layer.needs is not None:
            builds.append(layer)
            if len(builds) <= len(lacking):
                raise LayerNeeds(layer.tag, [lacking[len(builds) - 1]])
        return b"built"

    layer, output = with_missing(found, "codeagent/lang-java-deps:x", Layer(tag="codeagent/lang-java-build:x",
                                 parent="p", script="true", needs=lambda text: []), build)
    assert output == b"built" and layer.parent == missing_layer(found, "codeagent/lang-java-deps:x", lacking).tag


CRATE_WITHOUT_A_LOCKFILE = """[package]
name = "probe"
version = "0.1.0"
edition = "2021"
rust-version = "1.68"

[dev-dependencies]
trybuild = "1.0.108"
"""


@pytest.mark.docker
@pytest.mark.slow
def test_without_a_lockfile_the_dependencies_resolved_are_ones_this_rustc_builds(make_repo):
    """dtolnay/anyhow and bitflags state no Cargo.lock, an old rust-version and `trybuild = "1.0.x"`: the newest
    trybuild was resolved (1.0.122 needs rustc 1.88) and nothing compiled on Debian's rustc, the only one reached
    here; Cargo's own rust-version-aware resolver bounded by the package's 1.68 finds no trybuild at all."""
    from codeagent.harness.layers.layer import build_layer
    from codeagent.harness.layers.python_env import base_image
    from codeagent.harness.toolchain.deps import fetch_step, toolchain_layer
    from codeagent.harness.toolchain.detect import RepoFiles
    from codeagent.sandbox.docker import docker_client

    snap = snapshot(make_repo({"Cargo.toml": CRATE_WITHOUT_A_LOCKFILE, "src/lib.rs": ""}))
    found = detect(snap)
    top = build_layer(toolchain_layer(found, base_image(None))).tag
    step = fetch_step(found, top, snap, RepoFiles(snap), trusted=False)
    build_layer(step.layer)
    probe = ("cd /testbed; v=$(grep -A1 '^name = \"trybuild\"$' Cargo.lock | sed -n 's/^version = \"\\(.*\\)\"$/\\1/p'); "
             "echo trybuild=$v; tar -xzOf $CARGO_HOME/registry/cache/*/trybuild-$v.crate trybuild-$v/Cargo.toml "
             "| grep '^rust-version'; rustc --version")
    said = docker_client().containers.run(step.layer.tag, ["bash", "-c", probe], remove=True,
                                          network_mode="none").decode()
    needs = re.search(r'^rust-version = "1\.(\d+)', said, re.M)
    has = re.search(r"^rustc 1\.(\d+)", said, re.M)
    assert needs and has and int(needs.group(1)) <= int(has.group(1)), said
