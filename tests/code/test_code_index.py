"""Symbol index: file discovery, definitions, references, caching by mtime/size and content."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from codeagent.code.files import is_test_path, iter_source_files
from codeagent.code.index import RepoIndex
from codeagent.code.tags import TagCache

MINIREPO = Path(__file__).parent.parent / "data" / "code" / "minirepo"


@pytest.fixture()
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(MINIREPO, root)
    return root


def test_walk_skips_vcs_venvs_vendored_binary_and_huge_files(repo):
    for folder in (".git", "node_modules/pkg", ".venv/lib", "myenv", "build/lib", "src/__pycache__"):
        (repo / folder).mkdir(parents=True)
        (repo / folder / "hidden.py").write_text("def hidden(): pass\n")
    (repo / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    (repo / "shop" / "blob.py").write_bytes(b"\x00\x01binary")
    (repo / "shop" / "huge.py").write_text("x = 1\n" * 400_000)
    (repo / "shop" / "build").mkdir()  # only a top-level build/ is skipped
    (repo / "shop" / "build" / "steps.py").write_text("def step(): pass\n")
    (repo / "README.md").write_text("# not code\n")

    found = list(iter_source_files(repo))
    assert "shop/cart.py" in found and "shop/build/steps.py" in found
    assert not [p for p in found if "hidden" in p]
    assert "shop/huge.py" not in found
    index = RepoIndex(repo)
    assert "shop/blob.py" not in index.files  # binary: listed by extension, dropped when read
    assert sorted(index.files) == [
        "shop/__init__.py", "shop/build/steps.py", "shop/cart.py", "shop/discounts.py",
        "shop/models.py", "shop/payment.py", "shop/utils.py", "tests/test_cart.py",
    ]


def test_find_definitions_simple_qualified_and_dotted(repo):
    index = RepoIndex(repo)
    apply = index.find_definitions("apply")
    assert [(d.path, d.symbol.qualname) for d in apply] == [
        ("shop/discounts.py", "Discount.apply"),  # same quality: by path, then line
        ("shop/discounts.py", "PercentageDiscount.apply"),
        ("shop/discounts.py", "FixedDiscount.apply"),
    ]
    [fixed] = index.find_definitions("FixedDiscount.apply")
    assert (fixed.path, fixed.line, fixed.symbol.kind) == ("shop/discounts.py", 27, "method")
    [total] = index.find_definitions("shop.cart.Cart.total")
    assert (total.path, total.symbol.start_line, total.symbol.end_line) == ("shop/cart.py", 25, 29)
    [module_level] = index.find_definitions("shop.models.price_with_tax")
    assert module_level.symbol.qualname == "price_with_tax"
    assert index.find_definitions("Cart.nothing") == []
    assert len(index.find_definitions("apply", limit=2)) == 2


def test_find_references_lists_uses_not_the_definition(repo):
    index = RepoIndex(repo)
    refs = index.find_references("parse_discount_code")
    assert [(r.path, r.line) for r in refs] == [("shop/cart.py", 3), ("shop/cart.py", 23)]
    assert refs[1].text == "self.discount = parse_discount_code(code)"
    # qualified names look up their last part; one result per line
    total_refs = index.find_references("Cart.total")
    assert [(r.path, r.line) for r in total_refs] == [("shop/payment.py", 13), ("tests/test_cart.py", 11)]
    assert len(index.find_references("Decimal", limit=3)) == 3
    assert index.count_references("Decimal") > 10


def test_refresh_rereads_only_changed_files(repo):
    cache = TagCache()
    index = RepoIndex(repo, cache=cache)
    assert index.refresh() == 0
    utils = repo / "shop" / "utils.py"
    utils.write_text(utils.read_text() + "\n\ndef cents(amount):\n    return int(amount * 100)\n")
    os.utime(utils, ns=(1, 1))  # a different mtime even on coarse clocks
    assert index.refresh() == 1
    assert [d.path for d in index.find_definitions("cents")] == ["shop/utils.py"]
    (repo / "shop" / "payment.py").unlink()
    index.refresh()
    assert "shop/payment.py" not in index.files
    assert index.find_definitions("PaymentGateway") == []


def test_content_cache_is_shared_between_indexes(repo, tmp_path):
    cache = TagCache()
    RepoIndex(repo, cache=cache)
    misses = cache.misses
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy)
    second = RepoIndex(copy, cache=cache)
    assert cache.misses == misses  # identical contents: nothing parsed again
    assert cache.hits == len(second.files) == 7


def test_is_test_path():
    assert is_test_path("tests/test_cart.py") and is_test_path("pkg/tests/helpers.py")
    assert is_test_path("testing/python/collect.py") and is_test_path("src/conftest.py")
    assert not is_test_path("src/_pytest/python.py") and not is_test_path("sympy/core/basic.py")
