"""What a session says in words: /resume's titles, and the summary after the TUI closes."""

from __future__ import annotations

from codeagent.config import Config
from codeagent.models import ScriptedModel
from codeagent.run.session import Session
from codeagent.run.session.summary import exit_summary, session_title
from codeagent.trajectory.sessions import SessionHeader
from tests.support.tui import PATCH, RUN, a_run


def test_a_long_title_is_cut_with_an_ellipsis_on_one_line():
    issue = "Removing every unit of an item leaves a ghost line in the cart, and the total counts it twice over"
    title = session_title(SessionHeader(id=RUN, created="", repo="", issue=issue + "\x1b[2J"))
    assert title.startswith(f"{RUN}  Removing every unit") and title.endswith("…") and "\x1b" not in title
    assert len(title) == len(RUN) + 2 + 60
    assert session_title(SessionHeader(id=RUN, created="", repo="", issue="short")) == f"{RUN}  short"


def test_the_exit_summary_says_what_was_done_and_how_to_resume(tmp_path):
    session = Session(Config(agent={"localize": False}, trajectories_dir=str(tmp_path)), ScriptedModel([]),
                      repo="/work/shop")
    assert exit_summary(session) is None  # nothing started: nothing to say
    a_run(session)
    session.state.last_status = "submitted"
    summary = exit_summary(session)
    assert summary.splitlines() == [
        f"codeagent: session {RUN} · submitted · 3 steps · 7,700 prompt + 180 completion tokens · $0.0221",
        f"Patch: 1 file(s), +4 -0, not applied; saved in {tmp_path / RUN}.patch",
        f"Resume it: codeagent solve --resume {RUN}"]
    session.state.applied = ("/work/checkout", PATCH)
    assert "+4 -0, applied to /work/checkout;" in exit_summary(session)
    session.state.applied = ("/work/checkout", "an older patch")
    assert "changed since it was applied to /work/checkout" in exit_summary(session)
