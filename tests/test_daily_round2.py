"""Issue 38's smaller items (7) that a unit can show: counts are said right ("1 step")."""

from __future__ import annotations

import io

from codeagent.events import Finished, SubagentFinished
from codeagent.run.printers import ProgressPrinter


def test_one_step_is_one_step_not_one_steps():
    out = io.StringIO()
    ProgressPrinter(stream=out, compact=True)(Finished(run_id="r", trajectory_id="r", exit_status="answered", steps=1))
    ProgressPrinter(stream=out)(SubagentFinished(run_id="r", name="sub-1", exit_status="submitted", steps=1))
    ProgressPrinter(stream=out, compact=True)(Finished(run_id="s", trajectory_id="s", exit_status="answered", steps=2))
    text = out.getvalue()
    assert "answered · 1 step ·" in text and "submitted, 1 step," in text and "answered · 2 steps ·" in text
    assert "1 steps" not in text


def test_a_custom_commands_session_is_listed_by_the_command_typed(repo, env, tmp_path):
    """`--issue "/review main.py"` expands to the command's body; /resume's list (and `codeagent view`) name
    the session `/review main.py`, not the first line of that body."""
    import json
    import subprocess
    import sys

    from codeagent.run.session.summary import session_row
    from codeagent.trajectory.sessions import recent_sessions
    from codeagent.trajectory.store import TrajectoryStore

    commands = tmp_path / "commands"
    commands.mkdir()
    (commands / "review.md").write_text("---\ndescription: Review a file\n---\nYou are a careful reviewer.\n"
                                        "Review $ARGUMENTS for bugs.\n")
    (tmp_path / "no-user-config.yaml").write_text("{}\n")  # CODEAGENT_CONFIG's folder holds the user's commands/
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"id": "s", "model": "scripted",
                                  "messages": [{"role": "assistant", "content": "Looks fine."}]}))
    proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "solve", "--headless", "--repo", str(repo),
                           "--issue", "/review main.py", "--model", f"replay:{script}", "--sandbox", "local",
                           "--set", "agent.localize=false"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (header,) = recent_sessions(TrajectoryStore(tmp_path / "trajs"), str(repo))
    assert header.issue == "/review main.py" and "/review main.py" in session_row(header, 1, "answered")
    trajectory = TrajectoryStore(tmp_path / "trajs").load(header.id)
    assert "Review main.py for bugs." in trajectory.task["problem_statement"]  # the agent got the body


def test_a_session_started_by_a_custom_command_keeps_the_command_as_its_title(repo, tmp_path):
    """The TUI's path: Session.submit(body, title='/review main.py') starts the task under that title."""
    from codeagent.config import Config
    from codeagent.models import ScriptedModel
    from codeagent.run.session import Session
    from codeagent.trajectory.sessions import recent_sessions
    from codeagent.trajectory.store import TrajectoryStore

    store = TrajectoryStore(tmp_path / "trajs")
    config = Config(agent={"localize": False}, sandbox={"kind": "local"})
    session = Session(config, ScriptedModel([{"role": "assistant", "content": "Fine."}]), repo=str(repo), store=store)
    try:
        session.submit("You are a careful reviewer.\nReview main.py.", title="/review main.py")
        assert session.wait_idle(60)
    finally:
        session.close()
    (header,) = recent_sessions(store, str(repo))
    assert header.issue == "/review main.py"
