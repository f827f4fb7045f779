"""The Agent owns its state: outside codeagent/agent/, code configures it through its constructor and its
methods (use_model, use_config, set_mode, offer_only...), never by assigning its attributes. Checked on the
source like the import contracts (tests/test_layers.py): any `<agent>.x = ...` outside agent/ fails, where
<agent> is a name or attribute called `agent` (`agent`, `self.agent`, `session.agent`, `child_agent`...; not
`config.agent`, the settings) or a variable bound to `Agent(...)` in the same module."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parent.resolve().parents[1]
PACKAGE = ROOT / "codeagent"
AGENT_PACKAGE = PACKAGE / "agent"


def _names_agent(node: ast.expr, bound: set[str]) -> bool:
    """Whether the expression is (by its name, or by what it was bound to) an Agent."""
    if isinstance(node, ast.Name):
        return node.id in bound or node.id == "agent" or node.id.endswith("_agent")
    if isinstance(node, ast.Attribute):  # config.agent is the agent's settings (config/settings.py), not an Agent
        return (node.attr == "agent" or node.attr.endswith("_agent")) and not _is_config(node.value)
    if isinstance(node, ast.Call):  # Agent(...).x = ...
        return isinstance(node.func, ast.Name) and node.func.id == "Agent"
    return False


def _is_config(node: ast.expr) -> bool:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return "config" in name or "settings" in name


def _bound_to_agents(scope: ast.AST) -> set[str]:
    """Names assigned an `Agent(...)` in this source."""
    bound = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                isinstance(node.value.func, ast.Name) and node.value.func.id == "Agent":
            bound |= {target.id for target in node.targets if isinstance(target, ast.Name)}
    return bound


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        found: list[ast.expr] = []
        for target in node.targets:
            found += list(target.elts) if isinstance(target, ast.Tuple) else [target]
        return found
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    return []


def agent_attribute_writes(source: str, where: str) -> list[str]:
    """`where:line <expr>.attr` for each assignment (plain, augmented, annotated, tuple, setattr) of an attribute
    of an Agent in `source`."""
    tree = ast.parse(source)
    bound = _bound_to_agents(tree)
    found = []
    for node in ast.walk(tree):
        for target in _targets(node):
            if isinstance(target, ast.Attribute) and _names_agent(target.value, bound):
                found.append(f"{where}:{node.lineno} {ast.unparse(target)}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr") \
                and node.args and _names_agent(node.args[0], bound):
            found.append(f"{where}:{node.lineno} {ast.unparse(node)}")
    return found


def test_no_module_outside_agent_assigns_an_attribute_of_an_agent():
    writes = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if AGENT_PACKAGE in path.parents:
            continue
        writes += agent_attribute_writes(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert writes == [], "configure the Agent through its constructor or methods:\n" + "\n".join(writes)


def test_the_check_sees_every_spelling_of_a_write():
    source = (
        "def f(session, model):\n"
        "    agent = make()\n"
        "    agent.interactive = True\n"
        "    session.agent.mode = 'plan'\n"
        "    self.model = self.agent.model = model\n"
        "    mine = Agent(model, config)\n"
        "    mine.depth, mine.role = 1, 'subagent'\n"
        "    child_agent.steps += 1\n"
        "    setattr(session.agent, 'only_tools', None)\n"
        "    agent.inbox.put('x')\n"  # a method call on a part: not a write of the Agent's attribute
        "    session.agent.use_model(model)\n"
        "    agent_name = 'x'\n"
        "    config.agent.tools = ['bash']\n"  # the settings (config/settings.py), not an Agent
    )
    assert agent_attribute_writes(source, "m.py") == [
        "m.py:3 agent.interactive", "m.py:4 session.agent.mode", "m.py:5 self.agent.model", "m.py:7 mine.depth",
        "m.py:7 mine.role", "m.py:8 child_agent.steps", "m.py:9 setattr(session.agent, 'only_tools', None)"]
