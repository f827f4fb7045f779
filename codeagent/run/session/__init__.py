"""The interactive session: one task, one sandbox, one trajectory, many turns (core.py). Its clients,
the TUI (tui/) and the editors' ACP server (acp/), drive it through `Session`'s methods and follow its
events; none of it imports Textual.

    core.py        Session: what a client calls (submit, start, resume, interrupt, undo, apply, compact,
                   pick_candidate, clear, set_mode, set_work_mode, set_model, close) and reads (status)
    state.py       SessionState: its task, run, stats, patch history and what /apply last wrote
    events.py      its events beside the agent's (Notice, SessionChanged, Resumed, SamplingStarted) and
                   Submitted, what became of a message
    jobs.py        the jobs on its thread (start, follow-up, MCP prompt, resume, clear) and run_job
    turn.py        one turn of the agent; candidates.py: N candidates, then /candidates pick
    patch.py       /undo, /apply, write-through; patch_history.py: the patch after each change
    compact.py     /compact; stats.py: what it spent
    worker.py      the one background thread; sandbox_slot.py: its sandbox
    approval.py    approval modes, "always allow" rules and the Approver that asks;
                   approval_rules.py: the rules saved per repository, /rules
    message.py     a typed message made ready (@path mentions: mentions.py; pasted images); /init's request
    slash.py       slash commands: names, help, parsing; summary.py: the exit summary and /resume's rows
"""

from .approval import MODES, ApprovalRequest, Decision
from .core import Session
from .events import Notice, Resumed, SamplingStarted, SessionChanged, Submitted
from .state import SessionState

__all__ = ["MODES", "ApprovalRequest", "Decision", "Notice", "Resumed", "SamplingStarted", "Session",
           "SessionChanged", "SessionState", "Submitted"]
