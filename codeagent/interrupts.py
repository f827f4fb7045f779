"""Ctrl-C, made safe: never inside an import, and exit 130 after a handled one, not by SIGINT.

Inside an import: importlib's own code is not safe against a KeyboardInterrupt. One raised in its module
lock's weakref callback (`_get_module_lock.<locals>.cb`, right after it took the global import lock) is
"ignored" and leaves that lock held for good: the next import in any other thread (the model check's
litellm) waits forever, and so does the run (seen: 17 minutes). One raised while a class body runs at import
comes out as a RuntimeError ("Error calling __set_name__") and a traceback. So while the main thread is
inside an import, a Ctrl-C is held and delivered (as KeyboardInterrupt) the moment that import is over (and
while the command's modules are first imported, when the command starts: `ready`); a third Ctrl-C while one
is held ends the process at once.

Exit 130: CPython 3.11 marks a KeyboardInterrupt as unhandled when it escapes code run by `exec()` of a string
(the `dataclasses` module does that while a library is imported), even if a caller catches it later; at exit
the interpreter then kills itself with SIGINT (exit status -2) instead of the code passed to `sys.exit`."""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType

IMPORT_CODE = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")
RECHECK_SECONDS = 0.02  # how often a held Ctrl-C looks whether the import is over
FORCED_AFTER = 3  # Ctrl-Cs held at once: the third ends the process without waiting

_held = 0  # Ctrl-Cs held while the main thread imports
_ready = False  # the command's code runs (`ready`): a Ctrl-C held before is delivered there


def install() -> None:
    """Handle Ctrl-C as this module says, in the main thread, where Python's own handler is in place (a
    process started with SIGINT ignored keeps ignoring it). Until `ready()`, a Ctrl-C is held."""
    if (threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
        signal.signal(signal.SIGINT, _on_interrupt)


def ready() -> None:
    """The command's own code runs from here (inside its `try`): Ctrl-C is handled (installed if it was not),
    and one that came while the command's modules were imported is raised now, where it is caught."""
    global _ready, _held
    install()
    _ready = True
    if _held and signal.getsignal(signal.SIGINT) is _on_interrupt:
        _held = 0
        raise KeyboardInterrupt


def importing(frame: FrameType | None) -> bool:
    """`frame`, or a frame that called it, is importlib's: the main thread is inside an import."""
    while frame is not None:
        if frame.f_code.co_filename in IMPORT_CODE:
            return True
        frame = frame.f_back
    return False


def _on_interrupt(signum: int, frame: FrameType | None) -> None:
    global _held
    if _ready and not importing(frame):
        _held = 0
        raise KeyboardInterrupt
    _held += 1
    if _held >= FORCED_AFTER:
        os.write(2, b"interrupted (forced; `codeagent sandbox prune` removes a sandbox left behind)\n")
        os._exit(130)
    if _held == 1 and _ready:
        signal.signal(signal.SIGALRM, _deliver_held)
        signal.setitimer(signal.ITIMER_REAL, RECHECK_SECONDS)


def _deliver_held(signum: int, frame: FrameType | None) -> None:
    global _held
    if _held and importing(frame):
        signal.setitimer(signal.ITIMER_REAL, RECHECK_SECONDS)
        return
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    if _held:
        _held = 0
        raise KeyboardInterrupt


def forget_handled_interrupt() -> None:
    """Clear CPython's 'unhandled KeyboardInterrupt' mark: the interrupt was handled."""
    if sys.implementation.name != "cpython":
        return
    import ctypes

    try:
        ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt").value = 0
    except (AttributeError, ValueError, OSError):  # not exported by this build: nothing to clear
        pass
