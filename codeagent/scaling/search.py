"""Tree search over trajectories (after SWE-Search): expand from promising states, value them with the
verifiers, back the values up, and branch again where it pays.

The tree: the root is the issue (expanding it is a fresh run). Every finished run adds its states as
nodes, one after each step of it that changed the patch (before its last step), chained below the node it
was expanded from; the run itself is a leaf, a candidate. A node is a prefix of a recorded trajectory: the
run, how many of its messages, and the patch at that point.

Each wave picks up to `max_parallel` open nodes by UCT, value + exploration * sqrt(ln N / (1 + n)) (N the
leaves in the tree, n those below the node, picks in flight counted as leaves), and expands each:
backtracking to a recorded prefix, a branch is a new trajectory that starts from the node's messages in a
fresh sandbox with the node's patch restored, whatever the run did after that point. The new leaves are
verified; a node's value is the mean value (methods.values: verifier scores and votes) of the leaves below
it, recomputed every wave because votes move. A branch that ends with the very patch it started from
decided nothing: its leaf does not vote (`details["inherited"]`) and its node is not expanded again.
The tree is kept in the method's frontier: given back with a new budget, the search expands the same tree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..trajectory.store import TrajectoryError, TrajectoryStore
from .methods import Frontier, Scaling, agreement, values
from .normalize import diff_key
from .runs import Plan, Run
from .types import Candidate


@dataclass
class Node:
    number: int
    parent: Node | None = None
    source: Candidate | None = None  # the run whose first `messages` messages this state is (None: the root)
    messages: int = 0
    patch: str = ""
    leaves: list[int] = field(default_factory=list)  # candidate indices of the runs below
    closed: bool = False
    pending: int = 0  # picked in the wave in flight

    def ancestry(self) -> list[Node]:
        chain, node = [], self
        while node is not None:
            chain.append(node)
            node = node.parent
        return chain


def search(scaling: Scaling, frontier: Frontier) -> None:
    settings = scaling.config.scaling
    store = TrajectoryStore(scaling.config.trajectory_root())
    if not frontier.tree:
        frontier.tree.append(Node(0))
    nodes, pool = frontier.tree, frontier.pool
    root = nodes[0]
    while granted := scaling.budget.allow(settings.max_parallel):
        wave = frontier.round
        worth = values(pool)
        picks = []
        for _ in range(granted):
            node = pick(nodes, worth, settings.exploration)
            node.pending += 1
            picks.append(node)
        plans = [_plan(node, len(pool) + number, wave, store) for number, node in enumerate(picks)]
        runs = scaling.runner.run(plans)
        for node, run in zip(picks, runs):
            node.pending -= 1
            grow(node, run, nodes, store)
        new = [run.candidate for run in runs]
        scaling.verify(new)
        pool += new
        why = agreement(pool, settings.agree)
        where = ", ".join("the issue" if node is root else f"candidate {node.source.index if node.source else '?'} "
                          f"at message {node.messages}" for node in picks)
        scaling.progress(wave, why or f"wave {wave}: expanded {where}", pool)
        frontier.round += 1
        if why:
            break


def pick(nodes: list[Node], worth: dict[int, float], exploration: float) -> Node:
    """The open node with the highest UCT score (the root, the first node, is always open)."""
    total = len(nodes[0].leaves) + sum(node.pending for node in nodes)

    def uct(node: Node) -> float:
        visits = len(node.leaves) + node.pending
        value = sum(worth.get(i, 0.0) for i in node.leaves) / len(node.leaves) if node.leaves else 0.0
        return value + exploration * math.sqrt(math.log(total + 1) / (visits + 1))

    open_nodes = [node for node in nodes if not node.closed] or nodes[:1]
    return max(open_nodes, key=lambda node: (round(uct(node), 9), -node.number))


def grow(node: Node, run: Run, nodes: list[Node], store: TrajectoryStore) -> None:
    """Hang the finished run below `node`: its states as a chain of new nodes, then its leaf."""
    candidate = run.candidate
    if node.source is not None:
        candidate.details["branch"] = {"from_candidate": node.source.index, "messages": node.messages}
        if diff_key(candidate.patch) == diff_key(node.patch):
            candidate.details["inherited"] = True
            node.closed = True
    tail = node
    for messages, patch in _states(run, store):
        child = Node(len(nodes), parent=tail, source=candidate, messages=messages, patch=patch)
        nodes.append(child)
        tail = child
    for above in tail.ancestry():
        above.leaves.append(candidate.index)


def _states(run: Run, store: TrajectoryStore) -> list[tuple[int, str]]:
    """(prefix length, patch there) after each step of the run that changed the patch, but the last step."""
    candidate = run.candidate
    if not candidate.trajectory_id or not run.patches:
        return []
    try:
        trajectory = store.load(candidate.trajectory_id)
    except (TrajectoryError, OSError):
        return []
    return [(step.first_message + step.message_count, run.patches[step.index])
            for step in trajectory.steps[:-1] if step.index in run.patches]


def _plan(node: Node, index: int, wave: int, store: TrajectoryStore) -> Plan:
    if node.source is None or not node.source.trajectory_id:
        return Plan(index=index, round=wave)
    trajectory = store.load(node.source.trajectory_id)
    return Plan(index=index, round=wave, parents=[node.source], prefix=trajectory.messages[:node.messages],
                patch=node.patch)
