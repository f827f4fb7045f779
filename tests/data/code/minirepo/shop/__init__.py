from .cart import Cart
from .models import Customer, Product

__all__ = ["Cart", "Customer", "Product"]
