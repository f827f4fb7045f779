"""The trajectory store's one error."""

from __future__ import annotations


class TrajectoryError(Exception):
    """A trajectory cannot be found, written, or read."""
