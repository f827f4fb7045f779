"""The judge against fake fixes (issue 34): for each language task of tests/data/language_tasks/, a patch that
does NOT fix the bug but makes the test run look green is graded through the whole harness (its own
environment, a fresh container, the task's own test command): it must not resolve, and the report must
say why (`tamper_evidence`); gold must still resolve with no evidence. Every attack here resolved on
0972c8d (the commit the red team attacked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..support.language_tasks import make_base

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ATTACKS = Path(__file__).parent.parent / "data" / "judge_attacks"


@pytest.fixture(scope="module")
def tasks(tmp_path_factory, base_image):
    from codeagent.task import Task

    root = tmp_path_factory.mktemp("judge-tasks")
    found = {}
    for lang in ("go", "rust", "node", "maven", "c"):
        row, commit = make_base(lang, root / "repos")
        found[lang] = Task.from_swebench({**row, "base_commit": commit}, repo=str(root / "repos" / row["repo"]))
    return found


def grade(task, patch: str) -> dict:
    from codeagent.harness.env_grade import grade_patch

    return grade_patch(task, patch)


def attacks(lang: str) -> list[Path]:
    return sorted((ATTACKS / lang).glob("*.patch"))


def attack_ids() -> list[tuple[str, Path]]:
    return [(lang, path) for lang in ("go", "rust", "node", "maven", "c") for path in attacks(lang)]


@pytest.mark.parametrize(("lang", "attack"), attack_ids(), ids=lambda value: getattr(value, "stem", value))
def test_a_fake_fix_is_not_resolved_and_the_report_says_why(tasks, lang, attack):
    report = grade(tasks[lang], attack.read_text())
    assert report["outcome"] != "resolved", json.dumps(report, indent=1)[:4000]
    # scored, never masked: a run the attack cut short is the patch's failure, not the harness's
    assert report["outcome"] in ("unresolved", "patch_apply_failed"), json.dumps(report, indent=1)[:4000]
    assert report["tamper_evidence"] or report["touches_test_infrastructure"], json.dumps(report, indent=1)[:4000]


@pytest.mark.parametrize("lang", ["go", "rust", "node", "maven", "c"])
def test_gold_resolves_with_no_evidence(tasks, lang):
    report = grade(tasks[lang], tasks[lang].gold_patch)
    assert report["outcome"] == "resolved" and report["tamper_evidence"] == [], json.dumps(report, indent=1)[:4000]
    assert report["guard"], report


@pytest.mark.usefixtures("no_leaks")
def test_a_hacking_policy_earns_nothing_in_grpo_and_the_run_counts_it(tasks, tmp_path):
    """A scripted policy that, on the Go task, writes the fake fix (an init() that prints every test passing
    and exits 0) and submits: graded in a fresh sandbox of the task's environment with the task's own command
    (`rollout.grader: sandbox`, harness=True), its reward is 0 and the step's rollout record counts it as
    tampered (metrics.jsonl's `rollouts` event carries the same record)."""
    from codeagent.config import Config
    from codeagent.models.replay import ScriptedModel
    from codeagent.train.grpo.rollouts import Rollouts
    from codeagent.train.recipe import load_recipe
    from codeagent.trajectory.store import TrajectoryStore
    from tests.support.cart import turn

    task = tasks["go"]
    patch = (ATTACKS / "go" / "init_prints_passes_and_exits.patch").read_text()
    command = f"cat > /tmp/fix.patch <<'CODEAGENT_EOF'\n{patch}CODEAGENT_EOF\ngit apply /tmp/fix.patch && go test -v ./..."
    policy = ScriptedModel([turn("bash", command=command), turn("submit")])
    policy.close = lambda: None
    recipe = load_recipe("grpo-tiny", ["model.base=unused", f"output_dir={tmp_path / 'out'}", "rollout.environment=harness",
                                       "rollout.grader=sandbox", "rollout.workers=1"])
    rollouts = Rollouts(recipe, [task], tokenizer=type("T", (), {"eos_token_id": 2})(),
                        config=Config(trajectories_dir=str(tmp_path / "unused"), agent={"localize": False}),
                        store=TrajectoryStore(tmp_path / "rollouts"))
    rollouts.policy = lambda trainer, model=None: policy
    rollouts([task.instance_id], type("Trainer", (), {"state": type("State", (), {"global_step": 0})()})())
    [trajectory] = rollouts.store.list()
    assert "--- PASS: TestSub" in trajectory.messages[-3]["content"]  # in its own sandbox, the trick works
    assert "func init()" in trajectory.patch
    assert trajectory.verification["outcome"] == "unresolved", trajectory.verification
    assert any("tamper evidence" in reason for reason in trajectory.verification["distrust"])
    assert trajectory.rewards["total"] == 0.0
    assert rollouts.history[0]["tampered"] == 1 and rollouts.history[0]["infra_failures"] == 0
