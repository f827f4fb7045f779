from .cart import Cart


class PaymentDeclined(Exception):
    pass


class PaymentGateway:
    def __init__(self, client):
        self.client = client

    def charge(self, cart: Cart) -> str:
        amount = cart.total()
        response = self.client.post("/charges", {"amount": str(amount), "email": cart.customer.email})
        if response.get("status") != "ok":
            raise PaymentDeclined(response.get("reason", "unknown"))
        return response["id"]
