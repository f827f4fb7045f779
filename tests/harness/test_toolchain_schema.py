"""The `toolchain:` sections of languages/*.yaml are the harness's (harness/specs/toolchains.py): code navigation
keeps them as written, the harness parses them and says which language's section is malformed."""

from __future__ import annotations

import dataclasses

import pytest

import codeagent.code.languages as navigation
from codeagent.harness.specs import toolchains as schema


def test_every_language_with_a_toolchain_section_has_one_toolchain():
    names = [tool.name for tool in schema.toolchains()]
    assert len(names) == len(set(names)) == sum(1 for spec in navigation.LANGUAGES if spec.toolchain)
    assert {"go", "rust", "node", "java", "c/c++"} <= set(names)  # Python: the base image has it
    orders = [tool.order for tool in schema.toolchains()]
    assert orders == sorted(orders)


def test_navigation_knows_no_toolchain_type():
    assert not hasattr(navigation, "Toolchain") and not hasattr(navigation, "load_toolchain")


def test_a_malformed_section_names_its_language(monkeypatch):
    go = next(spec for spec in navigation.LANGUAGES if spec.name == "go")
    broken = dataclasses.replace(go, toolchain={k: v for k, v in go.toolchain.items() if k != "detect"})
    monkeypatch.setattr(schema, "LANGUAGES", (broken,))
    schema.toolchains.cache_clear()
    try:
        with pytest.raises(ValueError, match="toolchain of 'go' is not valid.*detect"):
            schema.toolchains()
    finally:
        schema.toolchains.cache_clear()
