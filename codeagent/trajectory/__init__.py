"""Trajectories: the schema of a run's record, the append-only store, and exports.

    schema.py     the Trajectory, its steps and totals
    store.py      the append-only JSONL store: writing records, listing and finding trajectories
    reading.py    a store file folded back into a Trajectory; trajectory JSON / JSONL files
    errors.py     TrajectoryError
    export.py     SFT / DPO / RL exports
    sessions.py   sessions to resume

The `codeagent traj ...` commands are in cli/traj_commands.py. Names are loaded on first access so that
importing the package (for the CLI) does not import pydantic.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "SCHEMA_VERSION": "schema",
    "Step": "schema",
    "ToolCallStats": "schema",
    "Totals": "schema",
    "Trajectory": "schema",
    "TrajectoryError": "errors",
    "TrajectoryFilter": "store",
    "TrajectoryStore": "store",
    "TrajectoryWriter": "store",
    "load_trajectory_file": "reading",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"codeagent.trajectory.{_EXPORTS[name]}"), name)
