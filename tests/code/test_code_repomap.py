"""Repo map: dependency graph, personalised PageRank, and rendering fitted to a token budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from codeagent.code.index import RepoIndex
from codeagent.code.repomap import RepoMap, estimate_tokens, fit_to_budget, render_tags

MINIREPO = Path(__file__).parent.parent / "data" / "code" / "minirepo"


@pytest.fixture(scope="module")
def repomap() -> RepoMap:
    return RepoMap(RepoIndex(MINIREPO))


def ordered(ranks: dict[str, float]) -> list[str]:
    return [p for p, _ in sorted(ranks.items(), key=lambda kv: -kv[1])]


def test_files_everyone_depends_on_rank_above_leaves(repomap):
    ranks, _ = repomap.rank_files()
    order = ordered(ranks)
    assert order[0] == "shop/utils.py"  # used by models and discounts, which everything uses
    assert order.index("shop/models.py") < order.index("shop/payment.py")
    assert order.index("shop/discounts.py") < order.index("tests/test_cart.py")


def test_personalisation_pulls_mentioned_files_up(repomap):
    ranks, _ = repomap.rank_files(mentioned_identifiers=["PaymentGateway"])
    assert ordered(ranks)[0] == "shop/payment.py"
    ranks, _ = repomap.rank_files(mentioned_files=["tests/test_cart.py"])
    assert ordered(ranks)[0] == "tests/test_cart.py"
    ranks, _ = repomap.rank_files(chat_files=["shop/payment.py"])
    assert ordered(ranks)[:2] == ["shop/payment.py", "shop/cart.py"]  # and what it uses


def test_tag_ranks_follow_uses(repomap):
    _, tags = repomap.rank_files()
    assert tags[("shop/models.py", "price_with_tax")] > 0
    assert ("shop/payment.py", "PaymentGateway") not in tags  # defined, never used elsewhere
    # builtins and names imported from outside the repository make no edges
    assert not any(name in {"ValueError", "Decimal", "dataclass"} for _, name in tags)


def test_render_fits_budget_and_grows_with_it(repomap):
    small = repomap.render(token_budget=40)
    large = repomap.render(token_budget=400)
    assert 0 < estimate_tokens(small) <= 40
    assert estimate_tokens(large) <= 400
    assert len(large.splitlines()) > len(small.splitlines())
    assert "shop/models.py:" in large
    # a method appears under its class, with line numbers
    assert "    25│     def total(self) -> Decimal:" in large and "     7│ class Cart:" in large
    assert repomap.render(token_budget=0) == ""


def test_chat_files_are_left_out_of_the_map(repomap):
    text = repomap.render(token_budget=1000, chat_files=["shop/models.py"])
    assert "shop/models.py:" not in text and "shop/utils.py:" in text


def test_token_counter_can_be_swapped(repomap):
    words = lambda text: len(text.split())
    text = repomap.render(token_budget=30, count_tokens=words)
    assert 0 < words(text) <= 30


def test_binary_search_takes_the_longest_prefix_that_fits(repomap):
    file_ranks, tag_ranks = repomap.rank_files()
    tags = repomap.ranked_tags(file_ranks, tag_ranks)
    assert len(tags) >= 10
    budget = estimate_tokens(render_tags(tags[:6])) + 3
    text = fit_to_budget(tags, budget)
    n = next(n for n in range(1, len(tags) + 1) if render_tags(tags[:n]) == text)
    assert n >= 6 and estimate_tokens(text) <= budget
    assert estimate_tokens(render_tags(tags[: n + 1])) > budget
