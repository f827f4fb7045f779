"""The layers of a language task's images (harness/toolchain/images.py), without building them: which
toolchain, variant and version; which layers, in which order, with which steps. The builds themselves
are tests/harness/test_language_grading_docker.py's."""

from __future__ import annotations

import pytest

from codeagent.harness.layers.layer import BuildResult
from codeagent.harness.specs.languages import language_spec_for
from codeagent.harness.toolchain import images as env_language
from codeagent.harness.toolchain.images import language_images, toolchain_of
from codeagent.sandbox import snapshot
from codeagent.task import Task

GO_MOD = "module example.com/calc\n\ngo 1.21\n"


def spec_of(environment: dict, repo: str = "/r"):
    task = Task(repo=repo, problem_statement="x", extra={"environment": {"test_cmd": "t", "log_parser": "pytest",
                                                                         **environment}})
    return task, language_spec_for(task)


def test_the_specs_toolchain_version_wins_over_the_repositorys(make_repo):
    snap = snapshot(make_repo({"go.mod": GO_MOD, "calc.go": "package calc\n"}))
    assert toolchain_of(spec_of({"language": "go"})[1], snap).version == "1.21"  # go.mod's
    found = toolchain_of(spec_of({"language": "go", "toolchain_version": "1.22.4"})[1], snap)
    assert found.version == "1.22.4" and found.label == "go 1.22.4"
    layer = env_language.toolchain_layer(found, "codeagent/base:x")
    assert "VERSION=1.22.4;" in layer.script  # languages/go.yaml's version_install gets it


def test_a_version_the_recipe_cannot_install_is_not_claimed(make_repo):
    snap = snapshot(make_repo({"Cargo.toml": "[package]\nname = \"c\"\n", "src/lib.rs": ""}))
    found = toolchain_of(spec_of({"language": "rust", "toolchain_version": "1.81"})[1], snap)
    assert found.version == "" and found.label == "rust"  # Debian's, and said so (facts: toolchain_fallback)


def test_the_variant_follows_the_lockfile_when_another_toolchain_is_detected_first(make_repo):
    snap = snapshot(make_repo({"go.mod": GO_MOD, "package.json": "{}", "yarn.lock": ""}))  # go is detected first
    found = toolchain_of(spec_of({"language": "node"})[1], snap)
    assert (found.toolchain.name, found.variant.name, found.version) == ("node", "yarn", "")


@pytest.fixture
def built(monkeypatch):
    """The layers language_images asks for, in order (nothing is built)."""
    layers = []

    def build_layer(layer, log_path=None):
        layers.append(layer)
        return BuildResult(layer.tag, True, 0.0)

    monkeypatch.setattr(env_language, "build_layer", build_layer)
    monkeypatch.setattr(env_language, "base_image", lambda suite: "codeagent/base:x")
    return layers


def test_without_an_install_the_toolchains_own_fetch_is_a_layer_of_its_own(make_repo, built):
    repo = make_repo({"go.mod": GO_MOD, "calc.go": "package calc\n"})
    task, spec = spec_of({"language": "go", "env": {"CGO_ENABLED": "0"}}, str(repo))
    images = language_images(task, spec)
    assert list(images.layers) == ["toolchain", "dependencies", "instance"] and images.built == list(images.layers.values())
    assert "go mod download" in built[1].script and built[1].parent == built[0].tag
    instance = built[2]
    assert instance.parent == built[1].tag and instance.tree.commit == snapshot(repo).commit
    # the repository's own code runs only here, and without network: its packages compiled once, offline
    assert not instance.network and "go test -exec /bin/true ./..." in instance.script
    assert built[1].network and "go test" not in built[1].script  # the fetch runs no repository code
    assert instance.env == {"CGO_ENABLED": "0"} and images.instance.startswith("codeagent/lang-instance:")
    again = language_images(task, spec)
    assert again.instance == images.instance  # the same content, the same tags


def test_system_packages_then_pre_install_and_install_in_the_instance(make_repo, built):
    repo = make_repo({"go.mod": GO_MOD, "calc.go": "package calc\n"})
    task, spec = spec_of({"language": "go", "system_packages": ["libfoo-dev"], "pre_install": ["echo pre"],
                          "install": ["go mod download", "go build ./..."]}, str(repo))
    images = language_images(task, spec)
    assert list(images.layers) == ["toolchain", "packages", "instance"]
    assert "libfoo-dev" in built[1].script and built[1].parent == built[0].tag
    steps = built[2].script.splitlines()
    assert steps[:4] == ["cd /testbed", "echo pre", "go mod download", "go build ./..."]
    assert steps[4] == env_language.RESTORE_LOCKFILES
    other = language_images(task, spec_of({"language": "go", "system_packages": ["libfoo-dev"],
                                           "install": ["go mod download"]}, str(repo))[1])
    assert other.instance != images.instance and other.env == images.env  # only the instance layer changes


def test_a_failed_layer_says_its_step_and_last_line_first():
    from codeagent.harness.layers.layer import LayerBuildError

    error = env_language.failed_step("install", LayerBuildError("codeagent/x:1", "exit code 2:\nfetching\nls: no /y\n"))
    assert str(error).splitlines() == ["building codeagent/x:1 failed: the install step: ls: no /y", "exit code 2:",
                                       "fetching", "ls: no /y"]
    full = env_language.failed_step("toolchain", LayerBuildError("codeagent/x:1", "the disk is full"))
    assert str(full).splitlines()[0] == "building codeagent/x:1 failed: the toolchain step: the disk is full"


def test_what_the_install_made_never_shows_in_a_diff_but_the_same_names_elsewhere_do(make_repo):
    import subprocess

    repo = make_repo({"a.txt": "a\n", ".gitignore": "ignored/\n"})
    for path in ("node_modules/p/i.js", "build/x", "weird[1].txt", "#notes", "é.txt", "ignored/y"):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("made by the install\n")
    subprocess.run(["bash", "-euo", "pipefail", "-c", env_language.EXCLUDE_INSTALLED], cwd=repo, check=True)
    status = lambda: subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True,  # noqa: E731
                                    text=True, check=True).stdout.splitlines()
    assert status() == []
    for path in ("src/build/new.c", "weird1.txt", "src/node_modules.js"):  # the agent's new files
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("new\n")
    assert sorted(status()) == ["?? src/", "?? weird1.txt"]
