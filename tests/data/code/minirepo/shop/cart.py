from decimal import Decimal

from .discounts import Discount, parse_discount_code
from .models import Customer, Product, price_with_tax


class Cart:
    def __init__(self, customer: Customer):
        self.customer = customer
        self.lines: dict[str, tuple[Product, int]] = {}
        self.discount: Discount | None = None

    def add_item(self, product: Product, quantity: int = 1) -> None:
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        _, current = self.lines.get(product.slug, (product, 0))
        self.lines[product.slug] = (product, current + quantity)

    def remove_item(self, product: Product) -> None:
        self.lines.pop(product.slug, None)

    def apply_code(self, code: str) -> None:
        self.discount = parse_discount_code(code)

    def total(self) -> Decimal:
        amount = sum((price_with_tax(p, q) for p, q in self.lines.values()), Decimal(0))
        if self.discount is not None:
            amount = self.discount.apply(amount)
        return amount
