from decimal import ROUND_HALF_UP, Decimal


def round_money(amount) -> Decimal:
    """Round to cents, halves away from zero."""
    return Decimal(amount).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def slugify(text: str) -> str:
    return "-".join(text.lower().split())
