"""Trajectories: the schema of a run's record, the append-only store, and exports.

Names are loaded on first access so that importing `codeagent.trajectory.commands` (for the CLI)
does not import pydantic.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "SCHEMA_VERSION": "schema",
    "Step": "schema",
    "ToolCallStats": "schema",
    "Totals": "schema",
    "Trajectory": "schema",
    "TrajectoryError": "store",
    "TrajectoryFilter": "store",
    "TrajectoryStore": "store",
    "TrajectoryWriter": "store",
    "load_trajectory_file": "store",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"codeagent.trajectory.{_EXPORTS[name]}"), name)
