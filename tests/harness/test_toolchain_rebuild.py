"""A layer that failed, or a build kept although it failed, is made again at once when the code and data
that make layers changed: a fix there does not always change the layer's tag (issue 36: MISSING_ROUNDS
3 -> 8 left jsoup's failed build found again by its tag, until its images were removed by hand; on the language-task
path, gson-2311's after its annotation-processor rule landed). Under the same code, a failure is said again, not
retried at every start. No Docker: the image store is a set."""

from __future__ import annotations

import pytest

from codeagent.harness.layers.layer import BuildResult, Layer, LayerBuildError
from codeagent.harness.toolchain import images as env_language
from codeagent.harness.toolchain import kept
from codeagent.harness.toolchain import resolve as env_toolchain
from codeagent.harness.toolchain.resolve import _Chain, _Failed, build_warning, detect
from codeagent.sandbox import snapshot

from ..support.toolchains import toolchain_repo


class Images:
    """The image store and the builds asked of it: each build's output is the next of `outputs`."""

    def __init__(self, monkeypatch, outputs):
        self.tags: set[str] = set()
        self.builds: list[str] = []
        self.outputs = list(outputs)
        monkeypatch.setattr(env_toolchain, "image_exists", lambda tag: tag in self.tags)
        monkeypatch.setattr("codeagent.sandbox.images.image_exists", lambda tag: tag in self.tags)
        monkeypatch.setattr(env_toolchain, "build_image", self.build)
        monkeypatch.setattr(env_language, "build_layer", self.build)
        monkeypatch.setattr(kept, "untag", self.tags.discard)

    def build(self, layer: Layer, path):
        if layer.tag in self.tags:
            return BuildResult(layer.tag, False, 0.0)
        self.builds.append(layer.tag)
        output = self.outputs.pop(0)
        if isinstance(output, Exception):
            raise output
        self.tags.add(layer.tag)
        return BuildResult(layer.tag, True, 1.0, output)


@pytest.fixture
def recipe(monkeypatch):
    """Set the recipe version as code changes would."""
    version = ["one"]
    monkeypatch.setattr(kept, "recipe_version", lambda: version[0])
    return version


def c_detected(tmp_path):
    return detect(snapshot(toolchain_repo("c", tmp_path)))


def test_a_failed_build_kept_is_built_again_once_the_code_changed(tmp_path, monkeypatch, recipe):
    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))
    found = c_detected(tmp_path)
    layer = Layer(tag="codeagent/lang-c-build:fixed-tag", parent="codeagent/lang-c:x", script="make")
    images = Images(monkeypatch, [b"codeagent: the build step exited 2\n", b"codeagent: the build step exited 0\n"])

    chain = _Chain(True, None)
    assert chain.build_step(found, layer, None) == layer.tag
    assert images.builds == [layer.tag] and "it exited 2" in chain.warnings[0]

    again = _Chain(True, None)  # the same code: the kept build is used, and its failure said again
    assert again.build_step(found, layer, None) == layer.tag
    assert images.builds == [layer.tag] and "it exited 2" in again.warnings[0]

    recipe[0] = "two"  # a fix in the code that builds layers, the layer's tag unchanged
    fixed = _Chain(True, None)
    assert fixed.build_step(found, layer, None) == layer.tag
    assert images.builds == [layer.tag, layer.tag], "the failed build was found again by its tag"
    assert fixed.warnings == [] and not build_warning(layer.tag).exists()


def test_a_layer_that_failed_is_tried_again_at_once_under_new_code_and_not_before(tmp_path, monkeypatch, recipe):
    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))
    layer = Layer(tag="codeagent/lang-c-deps:fixed-tag", parent="codeagent/lang-c:x", script="fetch")
    images = Images(monkeypatch, [LayerBuildError(layer.tag, "exit code 1:\nno such package"), b"fetched\n"])

    with pytest.raises(_Failed):
        _Chain(True, None).run("c dependencies", layer)
    same = _Chain(True, None)
    with pytest.raises(_Failed):
        same.run("c dependencies", layer)
    assert images.builds == [layer.tag] and "tried again 60 minutes after" in same.warnings[0]

    recipe[0] = "two"
    assert _Chain(True, None).run("c dependencies", layer) == b"fetched\n"
    assert images.builds == [layer.tag, layer.tag]


def test_a_failed_build_that_cannot_be_untagged_is_kept_and_said(tmp_path, monkeypatch, recipe):
    """Docker refusing to untag (a container still using the image) leaves the old build, said; it stops nothing."""
    from docker.errors import APIError

    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))
    found = c_detected(tmp_path)
    layer = Layer(tag="codeagent/lang-c-build:fixed-tag", parent="codeagent/lang-c:x", script="make")
    images = Images(monkeypatch, [b"codeagent: the build step exited 2\n"])
    assert _Chain(True, None).build_step(found, layer, None) == layer.tag

    def refuse(tag):
        raise APIError("conflict: image is being used by a running container")

    monkeypatch.setattr(kept, "untag", refuse)
    recipe[0] = "two"
    chain = _Chain(True, None)
    assert chain.build_step(found, layer, None) == layer.tag
    assert images.builds == [layer.tag] and "could not be removed to build it again: " in chain.warnings[0]


def test_a_language_tasks_failed_instance_build_is_built_again_once_the_code_changed(tmp_path, monkeypatch, recipe,
                                                                                     make_repo):
    """The language-task path (images.py): the instance layer's build failed and was kept; its tag does not
    change with the rules that would fix it (languages/*.yaml's `missing`), so only the code's version can."""
    from codeagent.harness.specs.languages import language_spec_for
    from codeagent.task import Task

    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(env_language, "base_image", lambda suite: "codeagent/base:x")
    repo = make_repo({"go.mod": "module example.com/calc\n\ngo 1.21\n", "calc.go": "package calc\n"})
    task = Task(repo=str(repo), problem_statement="x", instance_id="calc-1",
                extra={"environment": {"language": "go", "test_cmd": "go test ./...", "log_parser": "gotest"}})
    spec = language_spec_for(task)
    images = Images(monkeypatch, [b"go\n", b"fetched\n", b"codeagent: the build step exited 1\n",
                                  b"codeagent: the build step exited 0\n"])

    first = env_language.language_images(task, spec)
    assert images.builds == list(first.layers.values()) and kept.build_warning(first.instance).exists()
    assert env_language.language_images(task, spec).instance == first.instance
    assert len(images.builds) == 3  # the same code: the kept build is used as it is

    recipe[0] = "two"
    fixed = env_language.language_images(task, spec)
    assert fixed.instance == first.instance and images.builds[3:] == [first.instance]
    assert not kept.build_warning(first.instance).exists()
    env_language.language_images(task, spec)
    assert len(images.builds) == 4  # built once more, not at every start


def test_a_build_made_anew_that_succeeds_forgets_the_older_failure(tmp_path, monkeypatch, recipe, make_repo):
    """A failed instance build removed by hand and built again under the same code, successfully: its old note
    would have untagged the good build at the next code change (and said a failure that is gone)."""
    from codeagent.harness.specs.languages import language_spec_for
    from codeagent.task import Task

    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(env_language, "base_image", lambda suite: "codeagent/base:x")
    repo = make_repo({"go.mod": "module example.com/calc\n\ngo 1.21\n", "calc.go": "package calc\n"})
    task = Task(repo=str(repo), problem_statement="x", instance_id="calc-1",
                extra={"environment": {"language": "go", "test_cmd": "go test ./...", "log_parser": "gotest"}})
    spec = language_spec_for(task)
    images = Images(monkeypatch, [b"go\n", b"fetched\n", b"codeagent: the build step exited 1\n",
                                  b"codeagent: the build step exited 0\n"])
    first = env_language.language_images(task, spec)
    images.tags.discard(first.instance)  # `docker rmi` by hand
    env_language.language_images(task, spec)
    assert len(images.builds) == 4 and not kept.build_warning(first.instance).exists()
    recipe[0] = "two"
    env_language.language_images(task, spec)
    assert len(images.builds) == 4  # the good build is kept under the next code
