"""Images pulled from a registry (prebuilt.py)."""
