"""Driving the TUI (codeagent.tui.app) with Textual's pilot: an app on a scripted session, what the screen
shows, keys and lines typed, dialogs answered, and a fixed event stream fed to a session by hand."""

from __future__ import annotations

import asyncio
import functools
import io
import time

from codeagent.config import Config
from codeagent.events import (
    Finished,
    ModelOutput,
    Observed,
    PatchChanged,
    RunStarted,
    StepStarted,
    ToolCalled,
)
from codeagent.models import ScriptedModel
from codeagent.run.session import Session
from codeagent.trajectory.store import TrajectoryStore
from codeagent.tui.app import CodeagentApp
from codeagent.tui.approval_screen import ApprovalScreen

RUN = "20260101-120000-0a1b2c3d"
PATCH = """diff --git a/shop/cart.py b/shop/cart.py
index 3f1c2aa..9d0e1b2 100644
--- a/shop/cart.py
+++ b/shop/cart.py
@@ -18,5 +18,9 @@ class Cart:
     def remove(self, sku: str, quantity: int) -> None:
         line = self._lines[sku]
+        if quantity > line.quantity:
+            raise ValueError(f"cannot remove {quantity} of {sku}")
         line.quantity -= quantity
+        if line.quantity == 0:
+            del self._lines[sku]
"""


def sync(test):
    """Run an async test with asyncio (no pytest plugin needed)."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))

    return run


def screen_text(app) -> str:
    """What the terminal shows, as plain text (the compositor's full frame, dialogs included)."""
    from rich.console import Console

    console = Console(width=app.size.width, height=app.size.height, file=io.StringIO(), record=True,
                      force_terminal=True, color_system=None)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


async def until(pilot, predicate, timeout: float = 30, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}\n{screen_text(pilot.app)}")
        await pilot.pause(0.05)


async def type_line(pilot, text: str) -> None:
    """Type a line key by key, then Enter."""
    await pilot.press(*text, "enter")


async def send(pilot, text: str) -> None:
    """Put a line in the input box (typing long lines key by key is slow), then press Enter."""
    pilot.app.prompt.load_text(text)
    await pilot.press("enter")


async def approve(pilot, *keys: str, title: str) -> str:
    app = pilot.app
    await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what=f"the dialog {title!r}")
    dialog = app.screen
    await pilot.pause(0.05)
    shown = screen_text(app)
    assert title in shown, shown
    await pilot.press(*keys)
    # the next dialog may open at once: wait for this one to go, not for no dialog
    await until(pilot, lambda: app.screen is not dialog, what="the dialog to close")
    return shown


def make_app(repo, tmp_path, turns, mode="suggest", model_class=ScriptedModel, **options):
    """A TUI on a session over `repo` with the scripted model: (app, session, model)."""
    store = TrajectoryStore(tmp_path / "trajectories")
    model = model_class(turns)
    session = Session(Config(agent={"localize": False}), model, repo=str(repo), mode=mode, store=store)
    return CodeagentApp(session, **options), session, model


async def quit_app(pilot, session) -> None:
    await pilot.press("ctrl+q")
    await until(pilot, lambda: not pilot.app.is_running or session.sandbox_state == "closed", what="quit")


def screen_app(model: str = "openai/gpt-4o", mode="suggest", candidates=1):
    """A TUI over /work/shop with no model turns, for screens fed events by hand (feed, a_run): (app, session)."""
    config = Config(agent={"localize": False}, scaling={"candidates": candidates})
    session = Session(config, ScriptedModel([], name=model), repo="/work/shop", mode=mode)
    session.repo_problem = lambda: None  # /work/shop is a name on the screens, not a folder: as if it were fine
    return CodeagentApp(session), session


def feed(session, *events) -> None:
    for event in events:
        event.run_id = event.run_id or RUN
        event.time = 0.0
        session._on_agent_event(event)  # as the agent's thread would, through the session


def a_run(session) -> None:
    feed(session,
         RunStarted(task_id="shop-1", model="openai/gpt-4o", sandbox="docker"),
         StepStarted(step=0),
         ModelOutput(step=0, text="Let me find where items are **removed** from the cart.", prompt_tokens=2100,
                     completion_tokens=40, cost=0.0061),
         ToolCalled(step=0, call_id="c1", tool="search", arguments={"command": "grep", "pattern": "def remove"}),
         Observed(step=0, call_id="c1", tool="search", output="shop/cart.py:19:    def remove(self, sku, quantity):",
                  exit_code=0, seconds=0.03),
         StepStarted(step=1),
         ModelOutput(step=1, text="`remove` never deletes the line:\n\n- drop it at zero\n- refuse to go negative",
                     prompt_tokens=2600, completion_tokens=120, cost=0.0079),
         ToolCalled(step=1, call_id="c2", tool="editor", arguments={
             "command": "str_replace", "path": "shop/cart.py", "old_str": "        line.quantity -= quantity",
             "new_str": "        line.quantity -= quantity\n        if line.quantity == 0:\n            del self._lines[sku]"}),
         Observed(step=1, call_id="c2", tool="editor", output="Edited shop/cart.py.", seconds=0.12),
         PatchChanged(step=1, patch=PATCH),
         StepStarted(step=2),
         ModelOutput(step=2, text="Now the tests.", prompt_tokens=3000, completion_tokens=20, cost=0.0081),
         ToolCalled(step=2, call_id="c3", tool="bash", arguments={"command": "python -m pytest -q tests"}),
         Observed(step=2, call_id="c3", tool="bash", output="......                                  [100%]\n"
                                                            "6 passed in 0.04s\n", exit_code=0, seconds=0.61),
         Finished(exit_status="submitted", message="the agent submitted its patch", patch=PATCH, steps=3,
                  cost=0.0221, seconds=12.3, trajectory_id=RUN))


async def settle(pilot) -> None:
    for _ in range(4):
        await pilot.pause(0.05)
    await pilot.wait_for_scheduled_animations()
