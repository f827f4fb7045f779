"""The interactive terminal UI of `codeagent solve` (Textual).

Importing this package does not import Textual: `run_tui` does, when it is called.

The session it shows (start, follow-ups, approvals, undo, apply, compact, resume, candidates) is
run/session/, which the editors' ACP server (acp/) drives too; here are only its widgets and screens:

    app.py       the App: wires the widgets below to a Session
    session_view.py  the session's events, each to the widget that shows it
    slash_commands.py  what each slash command does to the session and the widgets
    trust_screen.py  the question asked before the app when a repository's config needs trust
    transcript.py, diff_panel.py (and PatchScreen), status_bar.py, approval_screen.py, candidates.py,
    prompt.py, completion_menu.py (the / and @ popup), pick_screen.py (/resume's and /candidates' lists),
    link_screen.py
"""

from __future__ import annotations

import importlib.util
import os
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import Config
    from ..models import Model
    from ..task import Task
    from ..trajectory.store import TrajectoryStore

INSTALL_HINT = "the interactive TUI needs Textual: pip install 'codeagent[tui]' (or run with --headless)"


def tui_available() -> bool:
    return importlib.util.find_spec("textual") is not None


def run_tui(config: Config, model: Model | None, *, repo: str | Path = ".", commit: str | None = None,
            task: Task | None = None, replay: bool = False, mode: str = "suggest", resume: str | None = None,
            follow_up: str | None = None, apply_repo: str | Path | None | bool = True,
            store: TrajectoryStore | None = None) -> int:
    """Run the TUI until the user quits; the sandbox is removed on the way out. Returns the exit
    code: 0 (/quit, Ctrl-Q), 130 (Ctrl-C twice), or 1 when the app itself failed.

    - `task`: start on it at once (--issue, --issue-file, --example); else the user types the issue.
    - `resume`: a trajectory id or prefix, or "last" (this repository's latest session): reopen it
      in a new sandbox with its patch applied; `follow_up` continues it at once.
    - `model`: None opens the TUI anyway and asks for /model NAME.
    - `mode`: suggest | auto-edit | full-auto. `apply_repo`: where /apply writes (True: the task's
      repository when it is a local directory and not a bundled example; None: nowhere).
    - With config.scaling.candidates > 1 the first turn samples that many candidates (the
      candidates panel shows them) and follow-ups continue the selected one.
    """
    if not tui_available():
        raise RuntimeError(INSTALL_HINT)
    from ..run.session import Session
    from ..run.session.summary import exit_summary
    from .app import CodeagentApp

    session = Session(config, model, repo=repo, commit=commit, mode=mode, store=store, replay=replay,
                      apply_repo=apply_repo, save_rules=True)
    app = CodeagentApp(session, task=task, resume=resume, follow_up=follow_up)
    restore = _exit_on_hangup()
    try:
        app.run()
    finally:
        session.close()
        restore()
        if config.sandbox.kind == "docker":
            from ..sandbox.docker import close_all

            close_all()  # candidates' sandboxes still starting or running when the user quit
    summary = exit_summary(session, task)
    if summary:
        print(summary)
    return app.return_code or 0


def ask_trust(repo: str | Path, settings: list[str]) -> bool | None:
    """Ask whether to trust `repo`'s config that sets `settings`: True, False, or None (the user quit)."""
    from .trust_screen import TrustApp

    return TrustApp(repo, settings).run()


def _exit_on_hangup():
    """A closed terminal unwinds like Ctrl-C would, so the sandbox is removed."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGHUP"):
        return lambda: None

    def hangup(signum, frame):
        threading.Thread(target=_end_after_grace, args=(128 + signum,), name="codeagent-hangup", daemon=True).start()
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGHUP, hangup)
    return lambda: signal.signal(signal.SIGHUP, previous)


def _end_after_grace(code: int, grace: float = 30.0) -> None:
    """After a hang-up the unwinding has `grace` seconds; a process still alive then (a thread that waits
    for an answer nobody can give, a write to the closed terminal) removes its sandboxes (at most `grace`
    seconds more) and ends, so no orphan keeps a container running."""
    time.sleep(grace)
    from ..sandbox.docker import close_all

    removing = threading.Thread(target=close_all, name="codeagent-hangup-cleanup", daemon=True)
    removing.start()
    removing.join(grace)
    os._exit(code)
