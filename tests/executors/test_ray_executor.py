"""`--executor ray` for real: a Ray cluster of a head and worker nodes (processes on this machine,
each with its own sandbox slots) grades synthetic SWE-bench-format tasks in the real Docker engine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from codeagent.evals.batch import grade_batch
from codeagent.executors.local import LocalExecutor
from codeagent.task import Task
from tests.support.calc import BREAKS_MUL, CONFIG, GOLD, NOT_APPLYING, TEST_PATCH, calc_task
from tests.support.docker import sandbox_containers

ray = pytest.importorskip("ray", reason="the `ray` extra is not installed")  # setup.sh installs it by default

pytestmark = [pytest.mark.ray, pytest.mark.docker, pytest.mark.usefixtures("no_leaks")]

SLOW_GOLD = GOLD.replace("+    return a + b", "+    import time; time.sleep(4); return a + b")


@pytest.fixture(scope="module")
def cluster(base_image):
    """A head that runs no sandbox (as on a real cluster) and two worker nodes of one slot each."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"codeagent_sandbox": 0}, "include_dashboard": False})
    workers = [cluster.add_node(num_cpus=1, resources={"codeagent_sandbox": 1}) for _ in range(2)]
    ray.init(address=cluster.address, logging_level="WARNING")
    cluster.wait_for_nodes()
    yield cluster, workers
    ray.shutdown()
    cluster.shutdown()


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return calc_task(tmp_path_factory.mktemp("synthetic"))


def copies(task: Task, count: int) -> list[Task]:
    return [task.model_copy(update={"instance_id": f"synthetic__calc-{index}"}) for index in range(count)]


def verdicts(reports: list[dict]) -> dict[str, tuple]:
    return {r["instance_id"]: (r["outcome"], r["resolved"], json.dumps(r.get("tests_status"), sort_keys=True))
            for r in reports}


def test_ray_gives_the_local_verdicts_and_files(cluster, task, tmp_path):
    from codeagent.executors.ray_executor import RayExecutor

    tasks = copies(task, 4)
    patches = dict(zip([t.instance_id for t in tasks], [GOLD, "", BREAKS_MUL, NOT_APPLYING]))
    local = grade_batch(tasks, patches, tmp_path / "local", model_name="m", executor=LocalExecutor(2, threads=True))
    seen = []
    remote = grade_batch(tasks, patches, tmp_path / "ray", model_name="m", executor=RayExecutor(cluster[0].address),
                         progress=seen.append)
    assert verdicts(remote) == verdicts(local)
    assert [r["outcome"] for r in remote] == ["resolved", "unresolved", "unresolved", "patch_apply_failed"]
    assert sorted(r["instance_id"] for r in seen) == sorted(patches)  # each recorded once
    worker_ids = {node.node_id for node in cluster[1]}
    assert all(r["executor"]["kind"] == "ray" and r["executor"]["node"] in worker_ids for r in remote)
    gold_dir = tmp_path / "ray" / "instances" / "synthetic__calc-0"
    assert "PASSED tests/test_calc.py::test_add" in (gold_dir / "test_output.txt").read_text()
    assert json.loads((gold_dir / "prediction.json").read_text())["model_patch"] == GOLD
    assert len((tmp_path / "ray" / "predictions.jsonl").read_text().splitlines()) == 4


def test_a_worker_node_killed_mid_batch_loses_nothing(cluster, task, tmp_path):
    from codeagent.executors.ray_executor import RayExecutor

    head, _ = cluster
    doomed = head.add_node(num_cpus=1, resources={"codeagent_sandbox": 1})
    head.wait_for_nodes()
    tasks = copies(task, 4)
    patches = {t.instance_id: SLOW_GOLD for t in tasks}
    before = sandbox_containers()
    seen, outcome = [], {}

    def drive():
        outcome["reports"] = grade_batch(tasks, patches, tmp_path / "out", model_name="m",
                                         executor=RayExecutor(head.address), progress=seen.append)

    driver = threading.Thread(target=drive)
    driver.start()
    deadline = time.monotonic() + 300
    while len(sandbox_containers() - before) < 3 and time.monotonic() < deadline:  # every node has one in flight
        time.sleep(0.2)
    assert len(sandbox_containers() - before) >= 3, "the three nodes never ran at once"
    head.remove_node(doomed, allow_graceful=False)
    driver.join(timeout=600)
    reports = outcome["reports"]
    assert [r["outcome"] for r in reports] == ["resolved"] * 4, [r.get("reason") for r in reports]
    assert sorted(r["instance_id"] for r in seen) == sorted(patches)  # nothing lost, nothing twice
    assert all(r["executor"]["node"] != doomed.node_id for r in reports)  # its in-flight task ran again elsewhere
    assert not list((tmp_path / "out").glob("instances/*/error.json"))
    subprocess.run([sys.executable, "-m", "codeagent.cli", "sandbox", "prune"], check=True, capture_output=True)


def test_a_killed_driver_reruns_to_the_end(cluster, task, tmp_path):
    dataset = tmp_path / "tasks.jsonl"
    rows = [{"repo": "synthetic/calc", "instance_id": f"synthetic__calc-{index}", "base_commit": task.base_commit,
             "patch": SLOW_GOLD, "test_patch": TEST_PATCH, "problem_statement": "add() subtracts",
             "FAIL_TO_PASS": json.dumps(task.FAIL_TO_PASS), "PASS_TO_PASS": json.dumps(task.PASS_TO_PASS),
             "version": "1.0", "install_config": CONFIG} for index in range(4)]
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    repos = tmp_path / "repos" / "synthetic"
    repos.mkdir(parents=True)
    os.symlink(task.repo, repos / "calc")
    output = tmp_path / "out"
    command = [sys.executable, "-m", "codeagent.cli", "eval", "grade", "--dataset", str(dataset), "--gold",
               "--repos", str(tmp_path / "repos"), "--output", str(output), "--executor", "ray",
               "--ray-address", cluster[0].address]
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while not list(output.glob("instances/*/report.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    done_before = {p.parent.name: p.stat().st_mtime_ns for p in output.glob("instances/*/report.json")}
    assert 1 <= len(done_before) < 4
    second = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    reports = {p.parent.name: json.loads(p.read_text()) for p in output.glob("instances/*/report.json")}
    assert set(reports) == {f"synthetic__calc-{i}" for i in range(4)} and all(r["resolved"] for r in reports.values())
    assert {name: (output / "instances" / name / "report.json").stat().st_mtime_ns
            for name in done_before} == done_before  # none graded twice
    assert not list(output.glob("instances/*/*.previous.json"))
    assert len((output / "predictions.jsonl").read_text().splitlines()) == 4
    subprocess.run([sys.executable, "-m", "codeagent.cli", "sandbox", "prune"], check=True, capture_output=True)


def test_eval_run_on_ray_ships_the_trajectory_back_with_its_reward(cluster, task, tmp_path):
    """The agent (a replayed model) runs on a worker node; its prediction, grade and trajectory,
    with the verification and the reward, land on the driver's side."""
    from codeagent.agent.loop import Agent
    from codeagent.config import Config
    from codeagent.evals.batch import run_batch
    from codeagent.executors.ray_executor import RayExecutor
    from codeagent.models import ScriptedModel
    from codeagent.sandbox import open_sandbox
    from codeagent.trajectory.store import TrajectoryStore

    fix = {"role": "assistant", "content": "Fix add.", "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "editor", "arguments": json.dumps({"command": "str_replace", "path": "calc.py",
                                                   "old_str": "return a - b", "new_str": "return a + b"})}}]}
    done = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "submit", "arguments": "{}"}}]}
    with open_sandbox(task.repo, task.base_commit) as box:
        recording = Agent(ScriptedModel([fix, done]), Config(agent={"localize": False}),
                          store=TrajectoryStore(tmp_path / "recorded")).run(task, box)
    store_dir = tmp_path / "store"
    config = Config(model={"name": f"replay:{recording.trajectory_path}"}, trajectories_dir=str(store_dir),
                    agent={"localize": False})
    reports = run_batch([task], config.model_dump(mode="json"), tmp_path / "run",
                        executor=RayExecutor(cluster[0].address))
    assert reports[0]["resolved"] and reports[0]["exit_status"] == "submitted", reports[0].get("reason")
    assert reports[0]["executor"]["node"] in {node.node_id for node in cluster[1]}
    prediction = json.loads((tmp_path / "run" / "predictions.jsonl").read_text())
    assert "+    return a + b" in prediction["model_patch"] and prediction["trajectory_id"]
    trajectory = TrajectoryStore(store_dir).load(prediction["trajectory_id"])
    assert trajectory.verification["resolved"] is True and trajectory.rewards == {"resolved": 1.0}
    assert "test_patch" not in trajectory.task
    assert (tmp_path / "run" / "instances" / task.instance_id / "test_output.txt").exists()


def test_an_image_is_built_once_while_tasks_on_two_nodes_want_it(cluster, task, tmp_path):
    """Both worker nodes need the same new instance image at once: the node-level file lock lets one
    build it and the other wait and use it (the nodes share this machine's engine and cache here)."""
    import uuid

    from codeagent.executors.ray_executor import RayExecutor

    fresh = task.model_copy(update={"install_config": {**CONFIG, "install": [f"true {uuid.uuid4().hex}"]}})
    tasks = copies(fresh, 3)
    reports = grade_batch(tasks, {t.instance_id: GOLD for t in tasks}, tmp_path / "out", model_name="m",
                          executor=RayExecutor(cluster[0].address))
    assert all(r["resolved"] for r in reports), [r.get("reason") for r in reports]
    instance_tag = reports[0]["images"]["instance"]
    assert {r["images"]["instance"] for r in reports} == {instance_tag}
    assert sum(instance_tag in r["layers_built"] for r in reports) == 1
    assert len({r["executor"]["node"] for r in reports}) == 2  # both nodes took part


FIX = {"role": "assistant", "content": "Fix add.", "tool_calls": [{"id": "c1", "type": "function", "function": {
    "name": "editor", "arguments": json.dumps({"command": "str_replace", "path": "calc.py",
                                               "old_str": "return a - b", "new_str": "return a + b"})}}]}
DONE = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "c2", "type": "function", "function": {"name": "submit", "arguments": "{}"}}]}


def test_an_agent_here_drives_a_sandbox_on_a_worker_node(cluster, task, tmp_path):
    """The rollout shape: the model and the agent loop on the driver, the container on a node."""
    from codeagent.agent.loop import Agent
    from codeagent.config import Config
    from codeagent.executors.ray_sandbox import RaySandbox, open_docker
    from codeagent.models import ScriptedModel
    from codeagent.sandbox import open_sandbox
    from codeagent.trajectory.store import TrajectoryStore

    config = Config(agent={"localize": False})
    with open_sandbox(task.repo, task.base_commit) as box:
        local = Agent(ScriptedModel([FIX, DONE]), config, store=TrajectoryStore(tmp_path / "local")).run(task, box)
    with RaySandbox(open_docker(task.repo, task.base_commit), address=cluster[0].address) as box:
        assert box.node in {node.node_id for node in cluster[1]} and box.kind == "ray-docker"
        remote = Agent(ScriptedModel([FIX, DONE]), config, store=TrajectoryStore(tmp_path / "ray")).run(task, box)
        with pytest.raises(FileNotFoundError):  # the sandbox's own errors arrive as themselves
            box.read_file("no/such/file")
    assert remote.patch == local.patch and "+    return a + b" in remote.patch
    assert remote.exit_status == local.exit_status == "submitted"
    assert TrajectoryStore(tmp_path / "ray").load(remote.trajectory_id).exit_status == "submitted"


def test_a_sandbox_whose_node_dies_is_dead_not_hung(cluster, task):
    from codeagent.executors.ray_sandbox import RaySandbox, open_docker
    from codeagent.sandbox.errors import SandboxDead

    head, _ = cluster
    doomed = head.add_node(num_cpus=1, resources={"doomed_slot": 1})
    head.wait_for_nodes()
    box = RaySandbox(open_docker(task.repo, task.base_commit), address=head.address, resource="doomed_slot")
    assert box.node == doomed.node_id and box.run("echo hi").output.strip() == "hi"
    head.remove_node(doomed, allow_graceful=False)
    os.kill(box.host_pid, signal.SIGKILL)  # its processes go with a real node; here they may linger a while
    with pytest.raises(SandboxDead, match="Ray node is gone"):
        box.run("echo again", timeout=30)
    box.close()
    subprocess.run([sys.executable, "-m", "codeagent.cli", "sandbox", "prune"], check=True, capture_output=True)


def test_a_grpo_rollout_on_ray_earns_what_the_local_one_does(cluster, task, tmp_path, monkeypatch):
    """`rollout.executor: ray`: the rollout's sandbox on a worker node and its harness grade as a Ray
    task; the policy (scripted here) on the driver. Same run, same grade, same rewards as locally."""
    from codeagent.config import Config
    from codeagent.executors.ray_sandbox import RaySandbox
    from codeagent.models import ScriptedModel
    from codeagent.train.grpo.rollouts import Rollouts
    from codeagent.train.recipe import load_recipe
    from codeagent.trajectory.store import TrajectoryStore

    opened = []
    real_init = RaySandbox.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        opened.append(self.node)

    monkeypatch.setattr(RaySandbox, "__init__", init)
    results = {}
    for executor in ("local", "ray"):
        recipe = load_recipe("grpo-tiny", [f"model.base={tmp_path / 'unused'}", f"output_dir={tmp_path / executor}",
                                           f"rollout.executor={executor}", f"rollout.ray_address={cluster[0].address}",
                                           "rollout.environment=harness", "rollout.grader=harness"])
        store = TrajectoryStore(tmp_path / executor / "store")
        rollouts = Rollouts(recipe, [task], tokenizer=type("T", (), {"eos_token_id": 2})(),
                            config=Config(agent={"localize": False}), store=store)
        rollout = rollouts.run_one(task, ScriptedModel([FIX, DONE]), "group", 0)
        assert rollout.trajectory_id, rollout.masked
        results[executor] = (rollout, store.load(rollout.trajectory_id))
    (local, local_run), (remote, remote_run) = results["local"], results["ray"]
    assert remote.grade["outcome"] == local.grade["outcome"] == "resolved"
    assert remote.rewards == local.rewards and remote.rewards
    assert remote.exit_status == local.exit_status == "submitted" and remote.masked == local.masked
    workers = {node.node_id for node in cluster[1]}
    assert len(opened) == 1 and opened[0] in workers  # the ray rollout's sandbox, on a worker node
    assert remote.grade["executor"]["node"] in workers and "executor" not in local.grade
    assert remote_run.verification["resolved"] is True and remote_run.rewards == local_run.rewards
    graded = tmp_path / "ray" / "grading" / remote.trajectory_id / "test_output.txt"
    assert "PASSED tests/test_calc.py::test_add" in graded.read_text()


def test_a_grpo_step_on_ray_hands_trl_the_local_training_inputs(cluster, tmp_path, monkeypatch):
    """One GRPO step of the tiny model (CPU) whose rollouts' sandboxes are Ray actors on worker nodes:
    the ids, masks and rewards TRL trains on are those of the same step run locally (seeded sampling,
    one run at a time, so both paths sample the same tokens)."""
    import torch

    from codeagent.executors.ray_sandbox import RaySandbox
    from codeagent.train.grpo import trainer as grpo
    from codeagent.train.recipe import load_recipe
    from codeagent.train.tiny import build_tiny

    opened = []
    real_init = RaySandbox.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        opened.append(self.node)

    monkeypatch.setattr(RaySandbox, "__init__", init)
    torch.set_num_threads(1)
    tiny = build_tiny(tmp_path / "tiny", vocab_size=512)
    outputs = {}
    for executor in ("local", "ray"):
        run = load_recipe("grpo-tiny", [
            f"model.base={tiny}", f"output_dir={tmp_path / executor}", f"rollout.store={tmp_path / executor / 'runs'}",
            "data.tasks=toy:1", "trainer.max_steps=1", "trainer.num_generations=2",
            "trainer.per_device_train_batch_size=2", "rollout.max_tokens=16", "rollout.workers=1",
            "rollout.set={limits.max_steps: 2, model.seed: 7}",
            "rollout.mask_truncated=false", "rollout.mask_exit_statuses=[]",
            f"rollout.executor={executor}", f"rollout.ray_address={cluster[0].address}"])
        trainer, _, rollouts, _ = grpo.build_trainer(run)
        seen = []
        trainer.rollout_func = lambda prompts, t, rollouts=rollouts, seen=seen: seen.append(rollouts(prompts, t)) or seen[-1]
        trainer.train()
        assert len(seen) == 1
        outputs[executor] = seen[0]
    local, remote = outputs["local"], outputs["ray"]
    inputs = ("prompt_ids", "completion_ids", "env_mask", *(key for key in local if key.startswith("reward_")))
    assert len(local["prompt_ids"]) == 2 and all(len(ids) > 1 for ids in local["completion_ids"])
    assert all(1 in mask for mask in local["env_mask"])  # sampled tokens, in the loss
    assert all(value is not None for value in local["reward_resolved"])  # scored runs, not infrastructure failures
    for key in inputs:
        assert remote[key] == local[key], key
    assert set(remote["trajectory_id"]).isdisjoint(local["trajectory_id"])
    # the ray path's sandboxes: each of the 2 rollouts opens its own, then a fresh one its patch is graded in
    # (rollout.grader: sandbox never grades where the model worked)
    assert len(opened) == 4 and set(opened) <= {node.node_id for node in cluster[1]}


def test_prebuild_builds_the_batch_images_on_every_node_before_grading(cluster, task, tmp_path):
    """`eval grade --executor ray --prebuild`: a Ray task pinned to each worker node builds the
    batch's (new) instance image first; the grading tasks then find it and build nothing."""
    import uuid

    config = {**CONFIG, "install": [f"true {uuid.uuid4().hex}"]}  # an instance image no test built before
    dataset = tmp_path / "tasks.jsonl"
    rows = [{"repo": "synthetic/calc", "instance_id": f"synthetic__calc-{index}", "base_commit": task.base_commit,
             "patch": GOLD, "test_patch": TEST_PATCH, "problem_statement": "add() subtracts",
             "FAIL_TO_PASS": json.dumps(task.FAIL_TO_PASS), "PASS_TO_PASS": json.dumps(task.PASS_TO_PASS),
             "version": "1.0", "install_config": config} for index in range(2)]
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (tmp_path / "repos" / "synthetic").mkdir(parents=True)
    os.symlink(task.repo, tmp_path / "repos" / "synthetic" / "calc")
    output = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "codeagent.cli", "eval", "grade", "--dataset", str(dataset), "--gold",
                           "--repos", str(tmp_path / "repos"), "--output", str(output), "--executor", "ray",
                           "--ray-address", cluster[0].address, "--prebuild"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    import re

    assert re.search(r"prebuild: 2 task\(s\) on 2 node\(s\), [12] layer\(s\) built\n", done.stderr), done.stderr[-3000:]
    reports = [json.loads(p.read_text()) for p in output.glob("instances/*/report.json")]
    assert len(reports) == 2 and all(r["resolved"] for r in reports)
    assert all(r["layers_built"] == [] for r in reports)  # all built before grading began


def test_prebuild_on_every_node_pins_one_task_to_each(cluster):
    from codeagent.evals.prebuild import prebuild
    from codeagent.executors.ray_executor import RayExecutor

    results = prebuild([], RayExecutor(cluster[0].address))
    assert sorted(r["executor"]["node"] for r in results) == sorted(node.node_id for node in cluster[1])
    assert all(r["built"] == [] and r["errors"] == {} for r in results)


LOOPBACK = ("127.0.0.1", "::1", "::ffff:127.0.0.1")
LOCAL_DRIVER = """
import sys, time
from codeagent.executors.ray_executor import RayExecutor

def hold(repo):  # a task that keeps a sandbox open
    from codeagent.sandbox import open_sandbox
    box = open_sandbox(repo)
    time.sleep(600)

executor = RayExecutor(None, slots=1)
ray = executor.connect()
print("session", ray._private.worker._global_node.get_session_dir_path(), flush=True)
for _ in executor.map_unordered(hold, [sys.argv[1]]):
    pass
"""


def _ray_processes(session: str, driver: int) -> list:
    """The driver and every process that holds a file of its Ray session (daemons, agents, workers)."""
    import psutil

    found = []
    for process in psutil.process_iter():
        try:
            if process.pid == driver or any(f.path.startswith(session) for f in process.open_files()):
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _sandboxes_of(processes: list, before: set[str]) -> set[str]:
    import socket

    from codeagent.sandbox.docker import LABEL
    from codeagent.sandbox.engine import docker_client

    owners = {f"{socket.gethostname()}:{process.pid}" for process in processes}
    return {c.id for c in docker_client().containers.list(all=True, filters={"label": LABEL}, ignore_removed=True)
            if c.id not in before and c.labels.get("codeagent.owner") in owners}


def _listeners(processes: list) -> list[tuple[str, str, int]]:
    import psutil

    out = []
    for process in processes:
        try:
            out += [(process.name(), c.laddr.ip, c.laddr.port) for c in process.net_connections(kind="inet")
                    if c.status == psutil.CONN_LISTEN]
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return out


def test_a_local_ray_listens_on_loopback_only_and_dies_with_its_driver(task, tmp_path):
    """On main: GCS, raylet, agents, workers and three metrics exporters listened on every interface, the
    token file was 0644, and after kill -9 of the driver two agents lived on, listening, and the task's
    sandbox ran until `sandbox prune`; prune left the agents. Now the driver's watchdog ends them all."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "CODEAGENT_CACHE": str(tmp_path / "cache")}
    env.pop("RAY_ADDRESS", None)
    before = sandbox_containers()
    driver = subprocess.Popen([sys.executable, "-c", LOCAL_DRIVER, task.repo], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, env=env, start_new_session=True)
    try:
        line = driver.stdout.readline()
        assert line.startswith("session "), line
        session = line.split()[1]
        deadline = time.monotonic() + 300
        while not (held := _sandboxes_of(_ray_processes(session, driver.pid), before)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(held) == 1, "the task opened no sandbox"
        processes = _ray_processes(session, driver.pid)
        names = {process.name() for process in processes}
        assert {"gcs_server", "raylet"} <= names and any("Agent" in name for name in names), names
        listening = _listeners(processes)
        assert listening and [entry for entry in listening if entry[1] not in LOOPBACK] == []
        assert oct((home / ".ray" / "auth_token").stat().st_mode & 0o777) == "0o600"
    finally:
        driver.kill()  # kill -9: no shutdown runs
        driver.wait()
    # nothing else runs (no prune, no next run): the driver's watchdog stops Ray and removes the sandbox
    # (on 0972c8d, 20 s after kill -9 the agents and the sandbox were still up, until `sandbox prune`)
    deadline = time.monotonic() + 30
    while (_ray_processes(session, driver.pid) or held & sandbox_containers()) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = [process.name() for process in _ray_processes(session, driver.pid) if process.is_running()]
    assert left == []  # the agents too
    assert not held & sandbox_containers()
    assert not Path(session).exists()  # the private folder too
