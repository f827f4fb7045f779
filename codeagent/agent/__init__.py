"""The agent: one run of the loop on a task in a sandbox, and what the loop needs around it.

One job per module:
    loop.py            Agent: render prompts, ask the model, run the tools, observe; stop on submit or a
                       limit. Every step goes to the trajectory store. It owns its collaborators:
    model_call.py      ModelCall: a step's model call (the history fitted, a remote call waited on)
    tool_calls.py      ToolCaller: a reply's tool calls (limits, permission, hooks, subagents started together)
    step_record.py     StepRecord: what one step records in the trajectory
    step.py            ActiveRun (a run in flight) and the step's pieces that need no Agent
    run_types.py       RunOptions (how a run starts), RunResult (what it returns), Stop, Approval
    prompts.py         the Jinja2 templates of prompts/ (a user folder may override any of them)
    instructions.py    the repository's AGENTS.md (or CLAUDE.md) files, for the system prompt
    history.py         fitting the conversation into the model's context window
    model_progress.py  a step's model call as events: the reply forming, retries, waits
    hook_points.py     where the user's hooks (hooks.py) meet the loop
    modes.py           the work mode: `normal` (every tool) or `plan` (reading tools only)
    images.py          images attached to a message (`--image`, a path pasted in the TUI)
    subagents.py       sub-tasks handed to a fresh run in a copy of the sandbox

Nothing is re-exported here: importing a submodule runs this file first, and the light ones (modes.py,
images.py) must not pull the whole loop in. Import `Agent` from `codeagent.agent.loop`.
"""
