"""A layer that failed, or a build kept although it failed, is made again at once when the code and data
that make layers changed: a fix there does not always change the layer's tag (issue 36: MISSING_ROUNDS
3 -> 8 left jsoup's failed build found again by its tag, until its images were removed by hand). Under
the same code, a failure is said again, not retried at every start. No Docker: the image store is a set."""

from __future__ import annotations

import pytest

from codeagent.harness.layers.layer import BuildResult, Layer, LayerBuildError
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
        monkeypatch.setattr(env_toolchain, "build_image", self.build)
        monkeypatch.setattr(env_toolchain, "untag", self.tags.discard)

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
    monkeypatch.setattr(env_toolchain, "recipe_version", lambda: version[0])
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

    monkeypatch.setattr(env_toolchain, "untag", refuse)
    recipe[0] = "two"
    chain = _Chain(True, None)
    assert chain.build_step(found, layer, None) == layer.tag
    assert images.builds == [layer.tag] and "could not be removed to build it again: " in chain.warnings[0]
