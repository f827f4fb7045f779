"""Snapshots of the TUI's main screens, as text, fed with a fixed event stream (no model, no sandbox).

A snapshot is the terminal's text at a given size, in tests/snapshots/tui_*.txt. After an intended
change of the UI, look at the new screens and accept them with CODEAGENT_UPDATE_SNAPSHOTS=1.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codeagent.events import (
    CandidateScored,
    Finished,
    RunStarted,
    SelectionMade,
    StepStarted,
)
from codeagent.run.session.approval import ApprovalPolicy, build_request
from codeagent.run.session.events import SamplingStarted
from tests.support.tui import RUN, a_run, feed, screen_text, send, settle, sync
from tests.support.tui import screen_app as make_app

SNAPSHOTS = Path(__file__).parent.parent / "snapshots"
CART = b"""class Cart:
    def remove(self, sku: str, quantity: int) -> None:
        line = self._lines[sku]
        line.quantity -= quantity
"""


def assert_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / f"tui_{name}.txt"
    text = "\n".join(line.rstrip() for line in text.splitlines()) + "\n"
    if os.environ.get("CODEAGENT_UPDATE_SNAPSHOTS") or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if not os.environ.get("CODEAGENT_UPDATE_SNAPSHOTS"):
            pytest.fail(f"new snapshot {path.name} written: look at it, then run again")
        return
    assert text == path.read_text(), f"{path.name} changed; if intended, CODEAGENT_UPDATE_SNAPSHOTS=1:\n{text}"


@sync
async def test_snapshot_welcome():
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert_snapshot("welcome_80x24", screen_text(app))


@sync
async def test_snapshot_a_finished_run_with_its_patch_beside():
    app, session = make_app()
    async with app.run_test(size=(120, 34)) as pilot:
        app.transcript.add_user("Removing every unit of an item leaves a ghost line in the cart")
        a_run(session)
        await settle(pilot)
        assert_snapshot("run_120x34", screen_text(app))


@sync
async def test_snapshot_a_run_at_80_columns_and_its_diff_view():
    app, session = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        a_run(session)
        await settle(pilot)
        app.transcript.blocks[f"{RUN}/c3"].collapsed = False  # the tests' output, expanded
        await settle(pilot)
        assert_snapshot("run_80x24", screen_text(app))
        await send(pilot, "/diff")
        await settle(pilot)
        assert_snapshot("diff_80x24", screen_text(app))


@sync
async def test_snapshot_approval_dialogs():
    app, _ = make_app()
    policy = ApprovalPolicy()
    async with app.run_test(size=(80, 24)) as pilot:
        app._ask(build_request(policy, "bash", {"command": "python -m pytest -q tests/test_cart.py 2>&1 | tail -5"}))
        await settle(pilot)
        assert_snapshot("approve_command_80x24", screen_text(app))
        await pilot.press("n")
        await settle(pilot)
        assert_snapshot("approve_deny_reason_80x24", screen_text(app))
        await pilot.press("escape")
        edit = {"command": "str_replace", "path": "shop/cart.py", "old_str": "        line.quantity -= quantity\n",
                "new_str": "        line.quantity -= quantity\n        if line.quantity == 0:\n            del self._lines[sku]\n"}
        app._ask(build_request(policy, "editor", edit, read_file=lambda path: CART))
        await settle(pilot)
        assert_snapshot("approve_edit_80x24", screen_text(app))


@sync
async def test_snapshot_candidates_panel():
    app, session = make_app(mode="full-auto", candidates=3)
    async with app.run_test(size=(100, 30)) as pilot:
        runs = [f"20260101-120000-cand000{i}" for i in range(3)]
        session.state.scaling = True
        feed(session, SamplingStarted(count=3))
        for index, run in enumerate(runs):
            feed(session, RunStarted(run_id=run, task_id="shop-1", model="openai/gpt-4o", sandbox="docker"),
                 StepStarted(run_id=run, step=3 + index))
        feed(session, Finished(run_id=runs[1], exit_status="max_steps", steps=5))
        for index, run in enumerate(runs):
            feed(session, CandidateScored(run_id=run, index=index, exit_status="max_steps" if index == 1 else "submitted",
                                          scores={"regression": 1.0, "judge": 0.9 - index / 10}))
        feed(session, SelectionMade(policy="hybrid", chosen=0, why="the judge ranked it first; all tests pass"))
        session.state.scaling = False
        await settle(pilot)
        assert_snapshot("candidates_100x30", screen_text(app))


@sync
async def test_snapshot_help():
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await send(pilot, "/help")
        await settle(pilot)
        assert_snapshot("help_80x24", screen_text(app))
