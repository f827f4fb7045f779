"""Project instructions: AGENTS.md (CLAUDE.md where a folder has none) reach the model's system prompt,
nested per folder, and survive context elision."""

from __future__ import annotations

import pytest

from codeagent.agent.history import fit_messages
from codeagent.agent.instructions import instruction_files, render_instructions
from codeagent.agent.loop import Agent
from codeagent.config import Config
from codeagent.models import ScriptedModel
from codeagent.sandbox import open_sandbox
from codeagent.task import Task
from codeagent.trajectory.store import TrajectoryStore
from tests.support.scripted import call

pytestmark = pytest.mark.usefixtures("no_leaks")


def test_one_file_per_folder_root_first_and_odd_names_left_out():
    found = ["./src/app/CLAUDE.md", "./src/CLAUDE.md", "./AGENTS.md", "./src/AGENTS.md", "./CLAUDE.md",
             "./docs/CLAUDE.md", "../AGENTS.md", "/etc/AGENTS.md", "./x/notes.md"]
    assert instruction_files(found) == ["AGENTS.md", "docs/CLAUDE.md", "src/AGENTS.md", "src/app/CLAUDE.md"]
    text = render_instructions([("AGENTS.md", "Use tabs."), ("src/AGENTS.md", "Run make check."), ("e/AGENTS.md", " ")])
    assert text.index("### AGENTS.md (for the whole repository)\nUse tabs.") < text.index(
        "### src/AGENTS.md (for files under src/, over the ones above)\nRun make check.")
    assert "e/AGENTS.md" not in text and render_instructions([]) == ""


def test_the_instructions_come_back_whole_after_elision():
    keep = "## Project instructions\nAlways run tox -e lint before submitting."
    messages = [{"role": "system", "content": "You are an agent. " * 200 + keep},
                {"role": "user", "content": "the issue " * 200}]
    messages += [{"role": "assistant", "content": f"step {i} " * 100} for i in range(20)]
    fitted = fit_messages(messages, 600, keep=keep)
    assert sum(len(m["content"]) // 4 for m in fitted) < 700
    assert [m for m in fitted if m["role"] == "system"][-1]["content"] == keep
    small = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert fit_messages(small, 600, keep=keep)[1] == {"role": "system", "content": keep}  # never there: added
    assert fit_messages(messages[:2] + messages[-1:], 10_000, keep=keep) == messages[:2] + messages[-1:]


def test_an_agents_md_line_reaches_the_models_system_prompt(make_repo, tmp_path):
    repo = make_repo({"AGENTS.md": "# Rules\nNever edit generated.py by hand.\n",
                      "lib/CLAUDE.md": "Keep lib/ free of third-party imports.\n",
                      "lib/core/AGENTS.md": "Core functions need docstrings.\n",
                      "calc.py": "x = 1\n"})
    model = ScriptedModel([call("submit")])
    agent = Agent(model, Config(agent={"localize": False}), store=TrajectoryStore(tmp_path / "t"))
    with open_sandbox(str(repo)) as sandbox:
        agent.run(Task(repo=str(repo), problem_statement="anything"), sandbox)
    system = model.calls[0][0]
    assert system["role"] == "system" and "Never edit generated.py by hand." in system["content"]
    assert system["content"].index("### AGENTS.md") < system["content"].index("### lib/CLAUDE.md (for files under lib/") \
        < system["content"].index("### lib/core/AGENTS.md")
    assert "Core functions need docstrings." in system["content"]


def test_ctrl_c_during_a_command_keeps_the_step_for_the_trajectory_and_resume(make_repo, tmp_path):
    """Headless Ctrl-C arrives as KeyboardInterrupt in the middle of a tool call: the step (the
    model's call, its tokens, the interrupted observation) is recorded, not lost."""
    import os
    import signal
    import threading

    repo = make_repo({"a.py": "x = 1\n"})
    store = TrajectoryStore(tmp_path / "t")
    agent = Agent(ScriptedModel([call("bash", command="sleep 60")]), Config(agent={"localize": False}), store=store)
    with open_sandbox(str(repo)) as sandbox:
        threading.Timer(3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        result = agent.run(Task(repo=str(repo), problem_statement="anything"), sandbox)
    saved = store.load(result.trajectory_id)
    assert result.exit_status == "interrupted" and saved.totals.steps == 1 and saved.totals.prompt_tokens > 0
    assert [m["role"] for m in saved.messages][-2:] == ["assistant", "tool"]
    assert "Interrupted by the user" in saved.messages[-1]["content"]
