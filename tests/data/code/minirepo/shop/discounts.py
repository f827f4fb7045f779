from decimal import Decimal

from .utils import round_money


class InvalidDiscountCode(ValueError):
    pass


class Discount:
    def apply(self, amount: Decimal) -> Decimal:
        raise NotImplementedError


class PercentageDiscount(Discount):
    def __init__(self, percent: int):
        self.percent = percent

    def apply(self, amount: Decimal) -> Decimal:
        return round_money(amount * (100 - self.percent) / 100)


class FixedDiscount(Discount):
    def __init__(self, value: Decimal):
        self.value = value

    def apply(self, amount: Decimal) -> Decimal:
        return max(Decimal(0), amount - self.value)


def parse_discount_code(code: str) -> Discount:
    """`PCT10` -> 10% off, `OFF5` -> 5 off."""
    if code.startswith("PCT"):
        return PercentageDiscount(int(code[3:]))
    if code.startswith("OFF"):
        return FixedDiscount(Decimal(code[3:]))
    raise InvalidDiscountCode(code)
