"""The progress of `codeagent tasks mine`: bars and a row per candidate on a terminal, plain lines
elsewhere and under CI."""

from __future__ import annotations

import io

from rich.console import Console

from codeagent.mine.progress import MiningProgress


def _run(progress: MiningProgress) -> None:
    with progress:
        progress.scanning(4)
        progress.scanned("a" * 40, None, resumed=True)
        progress.scanned("b" * 40, "docs-only")
        progress.scanned("c" * 40, None)
        progress.scanned("d" * 40, None)
        progress.validating(2)
        progress.phase("c" * 10, "base run 2/3")
        progress.validated("c" * 40, True, "kept: 1 FAIL_TO_PASS")  # mining.py names it by its whole commit
        progress.phase("d" * 10, "environment")
        progress.validated("d" * 40, False, "skipped (validation): no FAIL_TO_PASS test")


def test_a_terminal_gets_bars_of_commits_candidates_and_validated(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    out = io.StringIO()
    progress = MiningProgress(Console(file=out, force_terminal=True, width=120, record=True))
    assert progress.live
    rows: list[str] = []
    original = progress.phase

    def phase(sha: str, text: str) -> None:
        original(sha, text)
        rows.extend(task.fields["status"] for task in progress._progress.tasks if task.description.strip() == sha)

    left: list[int] = []
    finished = progress.validated

    def validated(sha: str, kept: bool, text: str) -> None:
        finished(sha, kept, text)
        left.append(sum(1 for task in progress._progress.tasks if task.fields.get("candidate")))

    progress.phase = phase  # type: ignore[method-assign]
    progress.validated = validated  # type: ignore[method-assign]
    _run(progress)
    assert rows == ["base run 2/3", "environment"]  # a row per candidate with its phase
    assert left == [0, 0]  # a validated candidate's row goes
    final = progress.console.export_text()
    assert "commits scanned" in final and "4/4" in final
    assert "candidates" in final and "2/2" in final  # two of the three new commits
    assert "validated" in final and "kept 1 · skipped 1" in final
    assert "docs-only" not in final  # the reasons go to the rejects file, not the screen


def test_not_a_terminal_or_under_ci_prints_a_line_per_event(monkeypatch, capsys):
    for terminal, ci in ((False, None), (True, "true")):
        if ci:
            monkeypatch.setenv("CI", ci)
        else:
            monkeypatch.delenv("CI", raising=False)
        progress = MiningProgress(Console(file=io.StringIO(), force_terminal=terminal))
        assert not progress.live
        _run(progress)
        lines = capsys.readouterr().err.splitlines()
        assert lines == [f"[{'b' * 10}] skipped (candidate): docs-only", f"[{'c' * 10}] base run 2/3",
                         f"[{'c' * 10}] kept: 1 FAIL_TO_PASS", f"[{'d' * 10}] environment",
                         f"[{'d' * 10}] skipped (validation): no FAIL_TO_PASS test"]
