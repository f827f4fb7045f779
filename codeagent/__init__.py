"""codeagent: a terminal coding agent that resolves issues in real repositories."""

__version__ = "0.1.0"
