from decimal import Decimal

from shop.cart import Cart
from shop.models import Customer, Product


def test_total_with_percentage_code():
    cart = Cart(Customer("a@example.com"))
    cart.add_item(Product("Tea", Decimal("10.00")), 2)
    cart.apply_code("PCT10")
    assert cart.total() == Decimal("21.60")
