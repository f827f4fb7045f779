from dataclasses import dataclass
from decimal import Decimal


@dataclass
class Line:
    sku: str
    quantity: int
    unit_price: Decimal

    @property
    def subtotal(self) -> Decimal:
        return self.unit_price * self.quantity


class Cart:
    def __init__(self, discount_percent: int = 0):
        self._lines: dict[str, Line] = {}
        self.discount_percent = discount_percent

    def add(self, sku: str, quantity: int, unit_price: Decimal) -> None:
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        line = self._lines.get(sku)
        if line is None:
            self._lines[sku] = Line(sku, quantity, unit_price)
        else:
            line.quantity += quantity

    def remove(self, sku: str, quantity: int = 1) -> None:
        line = self._lines[sku]
        line.quantity -= quantity

    def lines(self) -> list[Line]:
        return list(self._lines.values())

    def total(self) -> Decimal:
        gross = sum((line.subtotal for line in self._lines.values()), Decimal("0"))
        return (gross * (100 - self.discount_percent) / 100).quantize(Decimal("0.01"))

    def __len__(self) -> int:
        return len(self._lines)
