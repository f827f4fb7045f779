"""Nested settings dicts (codeagent/nested.py): the one merge and the one reader of dotted keys."""

from __future__ import annotations

import pytest

from codeagent.config import ConfigError, parse_overrides
from codeagent.nested import Conflict, deep_merge, nest, put
from codeagent.train import TrainError
from codeagent.train.recipe import parse_overrides as recipe_overrides


def test_deep_merge_merges_mappings_and_leaves_the_lower_layer_alone():
    base = {"model": {"name": "a", "sampling": {"t": 1, "p": 0.9}}, "set": {"x": 1}}
    merged = deep_merge(dict(base), {"model": {"sampling": {"t": 0}}, "set": {"y": 2}}, whole=("set",))
    assert merged == {"model": {"name": "a", "sampling": {"t": 0, "p": 0.9}}, "set": {"y": 2}}
    assert base["model"]["sampling"] == {"t": 1, "p": 0.9}


def test_dotted_keys():
    tree: dict = {}
    put(tree, "a.b.c", 1)
    put(tree, ["a", "d"], 2)
    assert tree == {"a": {"b": {"c": 1}, "d": 2}}
    with pytest.raises(Conflict) as caught:
        put(tree, "a.d.e", 3)
    assert caught.value.part == "d"
    assert nest({"limits.max_steps": 3, "limits": {"max_cost": 1.0}, "model": {"sampling.t": 0}}) == {
        "limits": {"max_steps": 3, "max_cost": 1.0}, "model": {"sampling": {"t": 0}}}


def test_overrides_of_the_config_and_of_recipes_say_what_is_wrong():
    assert parse_overrides(["model.name=x", "limits.max_steps=3"]) == {"model": {"name": "x"},
                                                                     "limits": {"max_steps": 3}}
    with pytest.raises(ConfigError, match="limits is given a value and keys at once"):
        parse_overrides(["limits=3", "limits.max_steps=3"])
    with pytest.raises(ConfigError, match="not valid YAML"):
        parse_overrides(["model.name=[x"])
    assert recipe_overrides(["trainer.learning_rate=1e-4"]) == {"trainer": {"learning_rate": 1e-4}}
    with pytest.raises(TrainError, match="conflicts with another override of 'trainer'"):
        recipe_overrides(["trainer=1", "trainer.learning_rate=1e-4"])
