"""Scripted fixes of the cart example (`codeagent solve --example cart`): the buggy lines of shop/cart.py, the
right fix, and a model that edits them in and submits."""

from __future__ import annotations

import json

from codeagent.models import ScriptedModel

CART = "shop/cart.py"
BUGGY = "        line = self._lines[sku]\n        line.quantity -= quantity\n"
RIGHT = ("        line = self._lines[sku]\n        if quantity > line.quantity:\n            raise ValueError(sku)\n"
         "        line.quantity -= quantity\n        if line.quantity == 0:\n            del self._lines[sku]\n")


def turn(name: str, **arguments) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": f"{name}-{abs(hash(json.dumps(arguments))) % 10**8}", "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def fixer(new_text: str) -> ScriptedModel:
    return ScriptedModel([turn("editor", command="str_replace", path=CART, old_str=BUGGY, new_str=new_text),
                          turn("submit")])
