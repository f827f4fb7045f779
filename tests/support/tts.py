"""Scripted models for test-time scaling on the cart example: what they write depends on the conversation
(whether its first user message shows earlier attempts, how many turns it already has), so evolution's
later rounds and the search's branches (which start mid-conversation) each get their own answer."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

from codeagent.models import ScriptedModel
from tests.support.cart import BUGGY, CART, RIGHT, turn

# Always drops the whole line: fixes the case but breaks removing some units (a passing test).
WRONG = "        del self._lines[sku]\n"


def edit(new_text: str) -> dict:
    return turn("editor", command="str_replace", path=CART, old_str=BUGGY, new_str=new_text)


def assistant_turns(messages: list[dict]) -> int:
    return sum(message.get("role") == "assistant" for message in messages)


def conversational(decide: Callable[[list[dict]], dict]) -> ScriptedModel:
    return ScriptedModel([decide] * 40, name="scripted-tts")


def learns_from_feedback() -> Callable[[str], ScriptedModel]:
    """Writes the wrong fix from the issue alone, the right one once shown earlier attempts (evolution)."""
    def decide(messages: list[dict]) -> dict:
        if assistant_turns(messages):
            return turn("submit")
        first = next(m["content"] for m in messages if m["role"] == "user")
        return edit(RIGHT if "Earlier attempts" in first else WRONG)

    return lambda name: conversational(decide)


def wrong_then_right() -> Callable[[str], ScriptedModel]:
    """From the issue: the wrong fix first, the right one after; mid-conversation (a branch): submit."""
    fresh = itertools.count()
    lock = threading.Lock()

    def decide(messages: list[dict]) -> dict:
        if assistant_turns(messages):
            return turn("submit")
        with lock:
            number = next(fresh)
        return edit(WRONG if number == 0 else RIGHT)

    return lambda name: conversational(decide)


def judge_says(answer: str, base: Callable[[str], ScriptedModel]) -> Callable[[str], ScriptedModel]:
    """`base`'s models, and for the name "judge" one that answers YES to the judge and `answer` in a match."""
    def decide(messages: list[dict]) -> dict:
        prompt = messages[-1]["content"]
        return {"role": "assistant", "content": answer if "Answer with one letter, A or B" in prompt else "YES"}

    return lambda name: conversational(decide) if name == "judge" else base(name)


# Fixes per repository for the CLI's scripted backend: (path, the buggy text, a wrong fix, the right fix)
FIXES = {"cart": (CART, BUGGY, WRONG, RIGHT),
         "calc": ("calc.py", "    return a - b\n", "    return b - a\n", "    return a + b\n"),
         # pallets/flask at SWE-bench Lite's pallets__flask-4045 (a blueprint's name must not hold a dot):
         # bench/tts_cli_e2e.sh's run on a real repository
         "flask": ("src/flask/blueprints.py", "        self.name = name\n",
                   "        assert \".\" not in name\n        self.name = name\n",
                   "        if \".\" in name:\n            raise ValueError(\"'name' may not contain a dot '.' character.\")\n"
                   "        self.name = name\n")}
SITECUSTOMIZE = ("import codeagent.models as models\n\n"
                 "models.BACKENDS['script'] = 'tests.support.tts:backend'  # the tests' scripted models\n")


def backend(spec: str, **_options) -> ScriptedModel:
    """`--model script:cart|calc` (registered by a sitecustomize.py the CLI tests put on PYTHONPATH, so
    that spawned eval workers have it too): from the issue alone the wrong fix first and the right one
    after, the right one once shown earlier attempts, a submit mid-conversation; YES to the judge and A in
    a tournament's match."""
    path, buggy, wrong, right = FIXES[spec]
    fresh = itertools.count()
    lock = threading.Lock()

    def decide(messages: list[dict]) -> dict:
        last = str(messages[-1].get("content") or "")
        if "Answer with one letter, A or B" in last:
            return {"role": "assistant", "content": "A"}
        if "YES or NO" in last:
            return {"role": "assistant", "content": "YES"}
        if assistant_turns(messages):
            return turn("submit")
        first = next(str(m["content"]) for m in messages if m["role"] == "user")
        with lock:
            number = next(fresh)
        better = "Earlier attempts" in first or number > 0
        return turn("editor", command="str_replace", path=path, old_str=buggy, new_str=right if better else wrong)

    return ScriptedModel([decide] * 200, name=f"script:{spec}")
