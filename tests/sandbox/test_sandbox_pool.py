"""The warm pool with real Docker sandboxes: started ahead, each used once, none left behind."""

from __future__ import annotations

import threading

import pytest

from codeagent.sandbox import open_sandbox
from codeagent.sandbox.pool import WarmPool
from tests.support.docker import sandbox_containers

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("no_leaks")]


@pytest.fixture
def counted(make_repo):
    repo = make_repo({"a.txt": "a\n"})
    calls = []
    lock = threading.Lock()

    def factory():
        box = open_sandbox(str(repo))
        with lock:
            calls.append(box)
        return box

    return factory, calls


def test_sandboxes_are_started_ahead_fresh_and_never_more_than_the_caller_takes(counted):
    factory, calls = counted
    seen = set()
    with WarmPool(factory, ready=2, limit=3) as pool:
        assert pool.started == 2  # before anyone asked
        for index in range(3):
            with pool() as box:
                assert box.run(f"test ! -e used && touch used && echo {index}").output.strip() == str(index)
                seen.add(box.container.id)
    assert len(seen) == 3 and len(calls) == 3  # three fresh sandboxes, none started in vain


def test_closing_removes_the_ones_nobody_took(counted):
    factory, calls = counted
    pool = WarmPool(factory, ready=2)
    with pool() as box:
        box.run("true")
    pool.close()
    assert len(calls) >= 2  # one taken, one or two more started ahead (a start not begun is cancelled)
    # only this pool's own containers are counted: other processes on the engine start sandboxes too
    assert not {started.container.id for started in calls} & sandbox_containers()
    with pytest.raises(RuntimeError, match="closed"):
        pool()


def test_no_pool_is_the_plain_factory(counted):
    factory, calls = counted
    with WarmPool(factory, ready=0) as pool:
        assert pool.started == 0 and not calls
        with pool():
            pass
    assert len(calls) == 1


def test_solve_with_candidates_runs_them_in_sandboxes_started_ahead(tmp_path):
    """`solve --candidates N`: every sandbox (the candidates', the verifier's) is started by the warm
    pool ahead of its request, and the ones nobody took are removed (no_leaks)."""
    from codeagent.config import Config
    from codeagent.run.examples import example_as_task
    from codeagent.run.solve import solve
    from codeagent.sandbox import snapshot
    from tests.support.cart import RIGHT, fixer

    task = example_as_task("cart")
    config = Config(trajectories_dir=str(tmp_path / "store"), agent={"localize": False},
                    scaling={"candidates": 2, "max_parallel": 2, "verifiers": ["regression"]})
    snap = snapshot(task.repo, task.base_commit)
    starts, lock = [], threading.Lock()

    def factory():
        box = open_sandbox(snap)
        with lock:
            starts.append(threading.current_thread().name)
        return box

    outcome = solve(task, config, fixer(RIGHT), sandbox_factory=factory)
    assert outcome.scaling is not None and len(outcome.scaling.candidates) == 2
    assert all(c.exit_status == "submitted" for c in outcome.scaling.candidates)
    assert outcome.result.patch and "raise ValueError(sku)" in outcome.result.patch
    # two candidates and the regression verifier's sandboxes, all started ahead by the pool's threads
    assert len(starts) >= 3 and all(name.startswith("warm-sandbox") for name in starts), starts


def _rollout_step(tmp_path, monkeypatch, warm: int):
    """One GRPO step's rollouts (two of the cart example, one at a time, each graded in a fresh sandbox)
    with a scripted policy; the names of the threads that started their sandboxes."""
    from codeagent.config import Config
    from codeagent.models.replay import ScriptedModel
    from codeagent.run.examples import example_as_task
    from codeagent.sandbox import docker
    from codeagent.train.grpo.rollouts import Rollouts
    from codeagent.train.recipe import load_recipe
    from codeagent.trajectory.store import TrajectoryStore
    from tests.support.cart import RIGHT, fixer

    starts, lock = [], threading.Lock()
    original = getattr(docker.DockerSandbox, "counted_from", docker.DockerSandbox)  # not a Counted of a run before

    class Counted(original):
        counted_from = original

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            with lock:
                starts.append(threading.current_thread().name)

    monkeypatch.setattr(docker, "DockerSandbox", Counted)
    task = example_as_task("cart")
    recipe = load_recipe("grpo-tiny", ["model.base=unused", f"output_dir={tmp_path / 'out'}", "rollout.environment=base",
                                       "rollout.grader=sandbox", "rollout.workers=1", f"rollout.warm_sandboxes={warm}"])
    config = Config(trajectories_dir=str(tmp_path / "unused"), agent={"localize": False})
    rollouts = Rollouts(recipe, [task], tokenizer=type("T", (), {"eos_token_id": 2})(), config=config,
                        store=TrajectoryStore(tmp_path / "rollouts"))
    policy = ScriptedModel(fixer(RIGHT).turns * 2)  # the runs go one after the other: edit, submit, twice
    policy.close = lambda: None
    rollouts.policy = lambda trainer, model=None: policy
    trainer = type("Trainer", (), {"state": type("State", (), {"global_step": 0})()})()
    rollouts([task.instance_id] * 2, trainer)
    return rollouts, starts


def test_rollouts_run_in_sandboxes_started_ahead_with_the_same_results(tmp_path, monkeypatch):
    """GRPO rollouts (local executor, no services): every rollout's sandbox is started by the warm
    pool's threads ahead of its request, the step's results are those of the unpooled path, and the
    pool leaves nothing behind (no_leaks)."""
    warm, warm_starts = _rollout_step(tmp_path / "warm", monkeypatch, warm=1)
    cold, cold_starts = _rollout_step(tmp_path / "cold", monkeypatch, warm=0)
    # each rollout: the sandbox it runs in, and a fresh one its patch is graded in (rollout.grader=sandbox)
    assert len(warm_starts) == 4 and all(name.startswith("warm-sandbox") for name in warm_starts), warm_starts
    assert len(cold_starts) == 4 and not any(name.startswith("warm-sandbox") for name in cold_starts), cold_starts

    def outcome(rollouts):
        [summary] = rollouts.history
        runs = [rollouts.store.load(i) for i in rollouts.store.ids()]
        return (summary["rewards"], summary["infra_failures"],
                sorted((t.exit_status, t.patch, t.verification["outcome"]) for t in runs))

    assert outcome(warm) == outcome(cold)
    rewards, infra_failures, runs = outcome(warm)
    assert infra_failures == 0 and None not in rewards and len(runs) == 2  # both graded in their sandbox
    assert all(status == "submitted" and "raise ValueError(sku)" in patch for status, patch, _ in runs)
