"""The model client's import at launch (issue 27): litellm's import runs without the cyclic collector's passes
over the objects it makes, which are frozen afterwards; the collector runs again after it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("litellm")

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import gc, json, sys
{before}
from codeagent.models.litellm_model import _import_litellm
passes = []
gc.callbacks.append(lambda phase, info: phase == "start" and passes.append(info["generation"]))
_import_litellm()
during = len(passes)
_import_litellm()  # imported already: nothing to pause
print(json.dumps({{"during": during, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count(),
                  "litellm": "litellm" in sys.modules}}))
"""


def _import_in_child(before: str = "") -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", PROBE.format(before=before)], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_litellm_import_runs_without_collections_and_freezes_what_it_made():
    seen = _import_in_child()
    assert seen["litellm"]
    assert seen["during"] == 0  # not one collection pass during the import (dozens without the pause)
    assert seen["enabled"]  # the collector runs again afterwards
    assert seen["frozen"] > 100_000  # the modules' objects: later full collections skip them


def test_a_collector_disabled_by_the_user_stays_disabled():
    seen = _import_in_child("gc.disable()")
    assert seen["during"] == 0
    assert not seen["enabled"]
    assert seen["frozen"] == 0  # nothing frozen behind the user's back
