"""Offline selection: Best@N per policy vs Pass@N, Pass@1 and random on a constructed file."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from codeagent.cli.eval_commands import select_command
from codeagent.scaling.offline import evaluate, load_candidates, write_candidates
from codeagent.scaling.types import Candidate
from tests.support.calc_edits import FIX, FIX_COMMENTED, OTHER_FIX, diff


def c(instance: str, index: int, key: str | None, resolved: bool | None, patch: str = "p", **scores) -> Candidate:
    details = {"normalized": key} if key else {}
    return Candidate(instance_id=instance, index=index, patch=patch if key else "", scores=scores,
                     details=details, resolved=resolved)


def constructed() -> dict[str, list[Candidate]]:
    return {
        # the right answer has two votes: every policy but chance gets it
        "easy": [c("easy", 0, "wrong", False, regression=1.0), c("easy", 1, "right", True, regression=1.0),
                 c("easy", 2, "right", True, regression=1.0)],
        # three copies of a wrong patch outvote the right one, but they break a passing test
        "trap": [c("trap", 0, "wrong", False, regression=0.5), c("trap", 1, "wrong", False, regression=0.5),
                 c("trap", 2, "wrong", False, regression=0.5), c("trap", 3, "right", True, regression=1.0)],
        # nothing resolves; one candidate is discarded (empty)
        "hopeless": [c("hopeless", 0, "a", False, regression=1.0), c("hopeless", 1, None, False)],
    }


def test_numbers_on_a_constructed_set(tmp_path):
    path = tmp_path / "candidates.jsonl"
    write_candidates(path, constructed())
    groups = load_candidates(path)
    assert list(groups) == ["easy", "trap", "hopeless"] and len(groups["trap"]) == 4
    result = evaluate(groups, ["vote", "tests", "hybrid", "random"], seed=0)
    assert result["instances"] == 3 and result["candidates"] == 9
    assert result["pass_at_n"] == {"count": 2, "rate": round(2 / 3, 4)}
    assert result["pass_at_1"] == round((2 / 3 + 1 / 4 + 0) / 3, 4)
    # random among usable: easy 2/3, trap 1/4, hopeless 0/1 (the empty one is not drawn)
    assert result["random_expected"]["rate"] == round((2 / 3 + 1 / 4 + 0) / 3, 4)
    policies = result["policies"]
    assert policies["vote"]["best_at_n"] == 1 and policies["tests"]["best_at_n"] == 2
    assert policies["hybrid"] == {"best_at_n": 2, "rate": round(2 / 3, 4), "of_pass_at_n": 1.0, "of_gap": 1.0}
    pass_1 = 2 / 3 + 1 / 4 + 0  # summed over the instances: vote closes (1 - pass_1) / (2 - pass_1) of the gap
    assert policies["vote"]["of_gap"] == round((1 - pass_1) / (2 - pass_1), 4)
    trap = next(row for row in result["per_instance"] if row["instance_id"] == "trap")
    assert trap["policies"]["vote"]["chosen"] == 0 and trap["policies"]["hybrid"]["chosen"] == 3
    assert trap["usable"] == 4 and trap["classes"] == 2
    hopeless = next(row for row in result["per_instance"] if row["instance_id"] == "hopeless")
    assert hopeless["usable"] == 1 and not hopeless["pass_at_n"]


def test_normalizes_when_keys_are_missing():
    """Without stored keys, patches are keyed from their diff text (with a reader: fully)."""
    from tests.support.calc_edits import read

    patches = [(diff("calc.py", OTHER_FIX), False), (diff("calc.py", FIX), True), (diff("calc.py", FIX_COMMENTED), True)]
    group = {"t": [Candidate(instance_id="t", index=i, patch=p, resolved=r) for i, (p, r) in enumerate(patches)]}
    assert evaluate(group, ["vote"], readers={"t": read})["policies"]["vote"]["best_at_n"] == 1
    # the diff text alone cannot see that the comment changes nothing: three singletons, index 0 wins
    assert evaluate(group, ["vote"])["policies"]["vote"]["best_at_n"] == 0


def test_bad_files(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"instance_id": "x"}\n')
    with pytest.raises(ValueError, match="line 1"):
        load_candidates(path)
    path.write_text(c("x", 0, "a", True).model_dump_json() + "\n" + c("x", 0, "b", False).model_dump_json() + "\n")
    with pytest.raises(ValueError, match="repeated"):
        load_candidates(path)


def test_cli(tmp_path):
    path = tmp_path / "candidates.jsonl"
    write_candidates(path, constructed())
    out = tmp_path / "numbers.json"
    result = CliRunner().invoke(select_command, ["--candidates", str(path), "--policy", "vote", "--policy", "hybrid",
                                                 "--json", str(out), "--per-instance"])
    assert result.exit_code == 0, result.output
    assert "Best@N" in result.output and "Pass@N" in result.output and "trap" in result.output
    numbers = json.loads(out.read_text())
    assert set(numbers["policies"]) == {"vote", "hybrid"} and numbers["policies"]["hybrid"]["best_at_n"] == 2
    bad = CliRunner().invoke(select_command, ["--candidates", str(path), "--repos", str(tmp_path)])
    assert bad.exit_code != 0 and "go together" in bad.output
