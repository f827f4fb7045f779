"""A TUI session (codeagent.run.session.Session) driven without Textual: its events recorded, its approval
requests answered from a list."""

from __future__ import annotations

from codeagent.config import Config
from codeagent.models import ScriptedModel
from codeagent.run.session import Notice, Session
from codeagent.run.session.approval import Decision
from codeagent.trajectory.store import TrajectoryStore


class Recorder:
    """Collects the session's events; answers approval requests from a list of decisions."""

    def __init__(self, decisions=()):
        self.events, self.requests = [], []
        self.decisions = list(decisions)

    def emit(self, event):
        self.events.append(event)

    def ask(self, request):
        self.requests.append(request)
        request.answer(self.decisions.pop(0) if self.decisions else Decision("once"))

    def kinds(self):
        return [event.kind for event in self.events]

    def notices(self, level=None):
        return [e.text for e in self.events if isinstance(e, Notice) and (level is None or e.level == level)]


def make_session(repo, turns, tmp_path, recorder, mode="suggest", **options):
    config = Config(agent={"localize": False}, trajectories_dir=str(tmp_path / "trajectories"))
    model = ScriptedModel(turns)
    session = Session(config, model, repo=str(repo), mode=mode, store=TrajectoryStore(tmp_path / "trajectories"),
                      ask=recorder.ask, emit=recorder.emit, **options)
    return session, model
