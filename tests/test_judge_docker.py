"""The judge against fake fixes (issue 34): for each language task of tests/data/language_tasks/, a patch that
does NOT fix the bug but makes the test run look green is graded through the whole harness (its own
environment, a fresh container, the task's own test command): it must not resolve, and the report must
say why (`tamper_evidence`); gold must still resolve with no evidence. Every attack here resolved on
0972c8d (the commit the red team attacked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_language_grading_docker import make_base

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ATTACKS = Path(__file__).parent / "data" / "judge_attacks"


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
    assert report["tamper_evidence"] or report["touches_test_infrastructure"], json.dumps(report, indent=1)[:4000]


@pytest.mark.parametrize("lang", ["go", "rust", "node", "maven", "c"])
def test_gold_resolves_with_no_evidence(tasks, lang):
    report = grade(tasks[lang], tasks[lang].gold_patch)
    assert report["outcome"] == "resolved" and report["tamper_evidence"] == [], json.dumps(report, indent=1)[:4000]
    assert report["guard"], report
