from dataclasses import dataclass, field
from decimal import Decimal

from .utils import round_money, slugify

TAX_RATE = Decimal("0.20")


@dataclass
class Product:
    name: str
    unit_price: Decimal
    taxable: bool = True

    @property
    def slug(self) -> str:
        return slugify(self.name)


@dataclass
class Customer:
    email: str
    loyalty_points: int = 0
    addresses: list = field(default_factory=list)


def price_with_tax(product: Product, quantity: int = 1) -> Decimal:
    price = product.unit_price * quantity
    if product.taxable:
        price = price * (1 + TAX_RATE)
    return round_money(price)
