"""The session's one sandbox: opened on the task's snapshot with a patch put back, closed, and
its state (none | starting | ready | failed | closed) for the status bar."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ...config import Config
from ...sandbox import Sandbox, SandboxError, open_sandbox, sandbox_options, snapshot
from ...sandbox.restore import restore_patch
from ...task import Task
from ..history import PreparedHistory, sealed_history
from ..repo_env import repository_environment
from ..skill_mounts import with_skill_folders


class SandboxSlot:
    def __init__(self, config: Config, on_change: Callable[[], None], say: Callable[[str], None] = lambda _: None,
                 warn: Callable[[str], None] | None = None):
        """`on_change()` is called whenever the state changes; `say(line)` tells which environment the
        sandbox runs in (the repository's toolchain: run/repo_env.py), `warn(text)` what of it failed."""
        self.config = config
        self.on_change = on_change
        self.say = say
        self.warn = warn
        self.sandbox: Sandbox | None = None
        self.state = "none"
        self.opening = False
        self.closed = False  # set once the session closes: a sandbox still starting is removed
        self.history: dict | None = None  # what history the sandbox got (run/history.py), for the trajectory
        self._lock = threading.Lock()

    def open(self, task: Task, patch: str) -> None:
        """A new sandbox on the task's base commit with `patch` applied."""
        self.opening = True
        self.set_state("starting")
        try:
            snap, options = snapshot(task.repo, task.base_commit), sandbox_options(self.config.sandbox)
            prepared = PreparedHistory(snap, task.repo) if self.config.agent.repository_history else None
            if options["kind"] == "docker":  # the repository's toolchain, unless sandbox.image says otherwise
                options["image"] = repository_environment(snap, self.config, self.say, self.warn).image
            options = with_skill_folders(options, self.config, task.repo)  # the skills' files, read-only
            sandbox = open_sandbox(snap, **options)
            try:
                self.history = prepared.give(sandbox) if prepared is not None else sealed_history()
                self.say(self.history["note"])
                if patch.strip():
                    restore_patch(sandbox, patch)
            except BaseException:
                sandbox.close()
                raise
            with self._lock:
                if self.closed:
                    sandbox.close()
                    raise SandboxError("the session was closed while its sandbox started")
                self.sandbox = sandbox
        except BaseException:
            self.set_state("failed")
            raise
        finally:
            self.opening = False
        self.set_state("ready")

    def drop(self, state: str) -> None:
        """Remove the sandbox (if any); the state becomes `state`."""
        with self._lock:
            sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None:
            try:
                sandbox.close()
            except Exception:
                pass
        self.set_state(state)

    def set_state(self, state: str) -> None:
        self.state = state
        self.on_change()

    def swap_patch(self, current: str, wanted: str) -> bool:
        """Turn the sandbox's changes from `current` into `wanted`; False (nothing done) when its
        files no longer match `current`."""
        sandbox = self.sandbox
        if sandbox is None:
            return True
        if sandbox.diff(exclude=self.config.patch_exclude()) != current:
            return False
        if current.strip():
            restore_patch(sandbox, current, reverse=True)
        if wanted.strip():
            restore_patch(sandbox, wanted)
        return True
