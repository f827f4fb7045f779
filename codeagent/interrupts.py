"""Exit 130 after a handled Ctrl-C, not by SIGINT.

CPython 3.11 marks a KeyboardInterrupt as unhandled when it escapes code run by `exec()` of a string (the
`dataclasses` module does that while a library is imported), even if a caller catches it later; at exit the
interpreter then kills itself with SIGINT (exit status -2) instead of the code passed to `sys.exit`. A Ctrl-C
that lands while litellm is imported hit exactly that."""

from __future__ import annotations

import ctypes
import sys


def forget_handled_interrupt() -> None:
    """Clear CPython's 'unhandled KeyboardInterrupt' mark: the interrupt was handled."""
    if sys.implementation.name != "cpython":
        return
    try:
        ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt").value = 0
    except (AttributeError, ValueError, OSError):  # not exported by this build: nothing to clear
        pass
