"""Localization: issue mentions, tokenization, path resolution, BM25 chunks and the fused ranking."""

from __future__ import annotations

from pathlib import Path

import pytest

from codeagent.code.index import RepoIndex
from codeagent.code.localize import FileCandidate, Localizer, localize
from codeagent.code.mentions import extract_mentions
from codeagent.code.resolve import PathResolver
from codeagent.code.retrieval import ChunkIndex, code_tokens, file_chunks

MINIREPO = Path(__file__).parent.parent / "data" / "code" / "minirepo"

TRACEBACK_ISSUE = '''Applying a lower-case code crashes checkout:

```
Traceback (most recent call last):
  File "/srv/app/views.py", line 40, in checkout
    cart.apply_code(code)
  File "/usr/lib/python3/site-packages/shop/cart.py", line 23, in apply_code
    self.discount = parse_discount_code(code)
  File "/usr/lib/python3/site-packages/shop/discounts.py", line 37, in parse_discount_code
    raise InvalidDiscountCode(code)
shop.discounts.InvalidDiscountCode: pct10
```
Codes should be case-insensitive.
'''


@pytest.fixture(scope="module")
def localizer() -> Localizer:
    return Localizer(MINIREPO)


def test_mentions_paths_frames_identifiers():
    m = extract_mentions(TRACEBACK_ISSUE + "\nSee also `Cart.total()` in shop/models.py and PaymentGateway.")
    assert [(f.path.rsplit("/", 1)[-1], f.line, f.function, f.depth) for f in m.frames] == [
        ("views.py", 40, "checkout", 0), ("cart.py", 23, "apply_code", 1), ("discounts.py", 37, "parse_discount_code", 2),
    ]
    assert "shop/models.py" in m.paths and "/srv/app/views.py" in m.paths
    assert m.identifiers["parse_discount_code"] >= 3  # in a code block and a frame function
    assert m.identifiers["PaymentGateway"] == 1  # CamelCase in prose
    assert "Codes" not in m.identifiers and "should" not in m.identifiers
    assert "shop.discounts.InvalidDiscountCode" in m.dotted and "Cart.total" in m.dotted


def test_pytest_style_frames():
    m = extract_mentions("src/_pytest/python.py:1234: in collect\n    raise ValueError\nE   ValueError")
    assert [(f.path, f.line, f.function) for f in m.frames] == [("src/_pytest/python.py", 1234, "collect")]


def test_code_tokens_split_identifiers():
    assert code_tokens("getUserName(parse_qs) HTTPServer x") == [
        "getusername", "get", "user", "name", "parse_qs", "parse", "qs", "httpserver", "http", "server",
    ]
    assert code_tokens("the self and of") == []


def test_path_resolver():
    r = PathResolver(["src/pkg/core.py", "src/pkg/__init__.py", "docs/conf.py", "a/util.py", "b/util.py", "c/util.py", "d/util.py"])
    assert r.resolve("/home/me/venv/lib/python3.9/site-packages/pkg/core.py") == ["src/pkg/core.py"]
    assert r.resolve("core.py") == ["src/pkg/core.py"]
    assert r.resolve("util.py") == []  # too ambiguous
    assert r.resolve("/elsewhere/unrelated/core2.py") == []
    assert r.resolve_dotted("pkg.core.Thing.method") == ("src/pkg/core.py", ["Thing", "method"])
    assert r.resolve_import("src/pkg/core.py", ".") == "src/pkg/__init__.py"


def test_chunks_partition_a_file():
    index = RepoIndex(MINIREPO)
    source = (MINIREPO / "shop" / "cart.py").read_bytes()
    chunks = file_chunks("shop/cart.py", source, index.files["shop/cart.py"])
    names = [c.qualname for c, _ in chunks]
    assert names == [None, "Cart", "Cart.__init__", "Cart.add_item", "Cart.remove_item", "Cart.apply_code", "Cart.total"]
    tokens = {c.qualname: t for c, t in chunks}
    module_tokens = tokens[None]
    assert {"shop", "cart"} <= set(module_tokens) and {"shop", "cart"} <= set(tokens["Cart.total"])  # path tokens
    # the class chunk holds its own header only, not its methods' bodies
    assert "quantity" not in tokens["Cart"]
    scores = ChunkIndex(index).file_scores(ChunkIndex(index).chunk_scores(["fixed", "discount"]))
    assert max(scores, key=scores.get) == "shop/discounts.py"


def test_traceback_issue_localizes_to_the_deepest_frame(localizer):
    top = localizer.localize(TRACEBACK_ISSUE, k=3)
    assert all(isinstance(c, FileCandidate) for c in top)
    assert [c.path for c in top[:2]] == ["shop/discounts.py", "shop/cart.py"]
    assert "stack frame" in top[0].reasons
    assert top[0].symbols[0].qualname == "parse_discount_code"
    assert (top[0].symbols[0].start_line, top[0].symbols[0].end_line) == (31, 37)


def test_prose_issue_uses_bm25(localizer):
    issue = "When the order is cheaper than a fixed discount value the amount must not go below zero."
    rankings = localizer.rankings(issue)
    assert rankings["bm25"][0] == "shop/discounts.py"
    assert rankings["fusion"][0] == "shop/discounts.py"
    assert rankings["mentions"] == []  # nothing code-like in the text
    best = localizer.localize(issue, k=1)[0]
    assert "FixedDiscount.apply" in [s.qualname for s in best.symbols[:2]]


def test_test_files_are_demoted_unless_named(localizer):
    issue = "test_total_with_percentage_code fails: the Cart total with a percentage code is off by a cent"
    fusion = localizer.rankings(issue)["fusion"]
    assert fusion.index("tests/test_cart.py") > fusion.index("shop/cart.py")
    named = localizer.rankings(issue + " (see tests/test_cart.py)")["fusion"]
    assert named[0] == "tests/test_cart.py"


def test_localize_function_and_method_choice():
    top = localize(MINIREPO, "PaymentGateway.charge sends the amount without currency", k=2)
    assert top[0].path == "shop/payment.py"
    assert top[0].symbols[0].qualname == "PaymentGateway.charge"
    with pytest.raises(ValueError, match="unknown method"):
        localize(MINIREPO, "x", method="magic")
