from decimal import Decimal

import pytest

from shop import Cart


def test_add_and_total():
    cart = Cart()
    cart.add("apple", 2, Decimal("0.50"))
    cart.add("pear", 1, Decimal("1.25"))
    assert cart.total() == Decimal("2.25")


def test_add_same_sku_merges():
    cart = Cart()
    cart.add("apple", 2, Decimal("0.50"))
    cart.add("apple", 3, Decimal("0.50"))
    assert [(line.sku, line.quantity) for line in cart.lines()] == [("apple", 5)]


def test_remove_some_units():
    cart = Cart()
    cart.add("apple", 3, Decimal("0.50"))
    cart.remove("apple", 1)
    assert cart.lines()[0].quantity == 2


def test_remove_all_units_drops_the_line():
    cart = Cart()
    cart.add("apple", 2, Decimal("0.50"))
    cart.remove("apple", 2)
    assert len(cart) == 0
    assert cart.lines() == []


def test_remove_more_than_held_raises():
    cart = Cart()
    cart.add("apple", 1, Decimal("0.50"))
    with pytest.raises(ValueError):
        cart.remove("apple", 2)


def test_discount_applies_to_total():
    cart = Cart(discount_percent=10)
    cart.add("pear", 4, Decimal("2.50"))
    assert cart.total() == Decimal("9.00")
