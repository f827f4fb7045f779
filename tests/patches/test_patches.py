"""Patches as bytes, without Docker: the patch module, the trajectory store, --apply's checks,
and `eval grade`'s checks of its predictions file."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from codeagent import patches
from codeagent.run.apply import apply_patch
from codeagent.trajectory.export import to_jsonl
from codeagent.trajectory.store import TrajectoryStore, load_trajectory_file
from tests.support.checkout import LATIN1, LATIN1_EDIT, diff_of
from tests.support.git import git


def latin1_patch(tmp_path) -> tuple[str, bytes]:
    """A real git diff that edits a Latin-1 file: (the patch as codeagent holds it, its bytes)."""
    repo = tmp_path / "origin"
    repo.mkdir()
    (repo / "menu.txt").write_bytes(LATIN1)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "menu")
    (repo / "menu.txt").write_bytes(LATIN1_EDIT)
    data = subprocess.run(["git", "diff", "--binary"], cwd=repo, capture_output=True, check=True).stdout
    git(repo, "checkout", "-q", "--", ".")
    assert b"\xe9" in data and b"\xfb" in data
    return patches.decode(data), data


def test_every_byte_survives_the_round_trip():
    data = bytes(range(256)) * 2
    text = patches.decode(data)
    assert patches.encode(text) == data and not patches.is_utf8(text)
    assert patches.encode(json.loads(json.dumps(text))) == data
    assert patches.size(text) == len(data) and patches.for_display(text).count("\ufffd") > 0


def test_files_reads_quoted_paths_renames_and_binary():
    diff = (
        'diff --git "a/caf\\303\\251 menu.txt" "b/caf\\303\\251 menu.txt"\n--- "a/caf\\303\\251 menu.txt"\n'
        '+++ "b/caf\\303\\251 menu.txt"\n@@ -1 +1 @@\n-a\n+b\n'
        "diff --git a/old name.py b/new name.py\nsimilarity index 90%\nrename from old name.py\nrename to new name.py\n"
        "diff --git a/with space.bin b/with space.bin\nGIT binary patch\nliteral 1\nIcmZo*000310RR91\n\n"
        'diff --git a/tab b/"tab\\there"\nnew file mode 100644\n--- /dev/null\n+++ "b/tab\\there"\n@@ -0,0 +1 @@\n+x\n'
    )
    assert patches.files(diff) == ["café menu.txt", "old name.py", "new name.py", "with space.bin", "tab\there"]


def test_too_large_names_the_cap():
    assert patches.too_large("x" * 10, 10) is None and patches.too_large("x" * 10, None) is None
    reason = patches.too_large("x" * 11, 10)
    assert "11 bytes" in reason and "limits.max_patch_bytes" in reason


def test_store_keeps_a_latin1_patch_byte_for_byte(tmp_path):
    patch, data = latin1_patch(tmp_path)
    store = TrajectoryStore(tmp_path / "store")
    with store.create(task={"instance_id": "x"}) as writer:
        writer.update(patch=patch, exit_status="submitted")
    loaded = store.load(writer.id)
    assert patches.encode(loaded.patch) == data and loaded.exit_status == "submitted"
    exported = tmp_path / "export.jsonl"
    to_jsonl([loaded], exported)
    assert patches.encode(load_trajectory_file(exported).patch) == data
    single = tmp_path / "one.json"
    single.write_text(exported.read_text())
    assert patches.encode(load_trajectory_file(single).patch) == data


def test_candidate_files_keep_a_latin1_patch(tmp_path):
    from codeagent.scaling.offline import load_candidates, write_candidates
    from codeagent.scaling.types import Candidate

    patch, data = latin1_patch(tmp_path)
    write_candidates(tmp_path / "c.jsonl", {"x": [Candidate(instance_id="x", index=0, patch=patch)]})
    assert patches.encode(load_candidates(tmp_path / "c.jsonl")["x"][0].patch) == data


def test_apply_reproduces_latin1_bytes(checkout):
    patch = diff_of(checkout, lambda repo: (repo / "menu.txt").write_bytes(LATIN1_EDIT))
    outcome = apply_patch(checkout, patch)
    assert outcome.applied, outcome.message
    assert (checkout / "menu.txt").read_bytes() == LATIN1_EDIT


@pytest.mark.parametrize("target", ["/etc/passwd", "../../outside", "src/../../x", ".git/config"])
def test_apply_refuses_symlinks_that_leave_the_repo(checkout, target):
    patch = diff_of(checkout, lambda repo: (
        os.symlink(target, repo / "evil"), (repo / "src" / "app.py").write_text("print('bye')\n")))
    outcome = apply_patch(checkout, patch)
    assert not outcome.applied
    assert "symlinks that point outside the repository" in outcome.message and f"evil -> {target}" in outcome.message
    assert not os.path.lexists(checkout / "evil") and (checkout / "src" / "app.py").read_text() == "print('hi')\n"
    assert git(checkout, "status", "--porcelain") == ""


def test_apply_allows_a_symlink_inside_the_repo(checkout):
    patch = diff_of(checkout, lambda repo: os.symlink("../menu.txt", repo / "src" / "menu"))
    outcome = apply_patch(checkout, patch)
    assert outcome.applied, outcome.message
    assert os.readlink(checkout / "src" / "menu") == "../menu.txt"


def test_apply_never_writes_through_a_symlink_of_the_checkout(checkout, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    patch = diff_of(checkout, lambda repo: ((repo / "build").mkdir(), (repo / "build" / "out.txt").write_text("x\n")))
    os.symlink(outside, checkout / "build")  # the user's own (untracked, ignored) link
    (checkout / ".git" / "info" / "exclude").write_text("build\n")
    outcome = apply_patch(checkout, patch)
    assert not outcome.applied and "build/out.txt" in outcome.message
    assert list(outside.iterdir()) == []


def test_apply_refuses_dotgit_and_parent_paths_named(checkout):
    evil = ("diff --git a/.git/hooks/post-checkout b/.git/hooks/post-checkout\nnew file mode 100755\n"
            "--- /dev/null\n+++ b/.git/hooks/post-checkout\n@@ -0,0 +1 @@\n+touch /tmp/pwned\n")
    outcome = apply_patch(checkout, evil)
    assert not outcome.applied and ".git/hooks/post-checkout" in outcome.message
    assert not (checkout / ".git" / "hooks" / "post-checkout").exists()


# `eval grade`'s predictions: every problem is one line that names it, never a traceback.

ROW = {"repo": "synthetic/calc", "base_commit": "0" * 40, "patch": "", "test_patch": "", "problem_statement": "x",
       "FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]", "version": "1.0"}


def grade_cli(tmp_path, predictions: bytes, *extra: str, name: str = "preds.jsonl") -> subprocess.CompletedProcess:
    dataset = tmp_path / "tasks.jsonl"
    dataset.write_text("".join(json.dumps({**ROW, "instance_id": f"calc-{i}"}) + "\n" for i in range(2)))
    path = tmp_path / name
    path.write_bytes(predictions)
    return subprocess.run([sys.executable, "-m", "codeagent.cli", "eval", "grade", "--dataset", str(dataset),
                           "--predictions", str(path), "--output", str(tmp_path / "out"), *extra],
                          capture_output=True, text=True, timeout=120)


def pred(instance_id: str, patch: str = "") -> bytes:
    return (json.dumps({"instance_id": instance_id, "model_patch": patch}) + "\n").encode()


@pytest.mark.parametrize("content, expected", [
    (pred("calc-0") + pred("calc-1") + pred("calc-0"), "more than one prediction for calc-0"),
    (pred("calc-0") + pred("nope-7"), "not in"),
    (pred("calc-0") + b'{"instance_id": "calc-1", "model_patch": \n', "preds.jsonl:2: not valid JSON"),
    (pred("calc-0") + pred("calc-1").replace(b'""', '"caf\xe9"'.encode("latin-1")), "preds.jsonl:2: not UTF-8"),
    (pred("calc-0") + b'{"instance_id": "calc-1", "model_patch": 7}\n', "line 2: model_patch must be a string"),
])
def test_grade_rejects_bad_predictions_with_one_line(tmp_path, content, expected):
    proc = grade_cli(tmp_path, content)
    assert proc.returncode != 0 and expected in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    if "not in" in expected:
        assert "nope-7" in proc.stderr


def test_grade_rejects_an_id_given_twice_in_a_json_object(tmp_path):
    proc = grade_cli(tmp_path, b'{"calc-0": {"instance_id": "calc-0", "model_patch": ""},\n'
                               b' "calc-0": {"instance_id": "calc-0", "model_patch": "x"}}', name="preds.json")
    assert proc.returncode != 0 and "more than one value for calc-0" in proc.stderr, proc.stderr


@pytest.mark.parametrize("workers", ["0", "-1"])
def test_grade_rejects_workers_below_one(tmp_path, workers):
    proc = grade_cli(tmp_path, pred("calc-0"), "--workers", workers)
    assert proc.returncode == 2 and "--workers" in proc.stderr and "Traceback" not in proc.stderr


def test_grade_counts_instances_that_error_and_fails(tmp_path):
    proc = grade_cli(tmp_path, pred("calc-0") + pred("calc-1"))  # base commit 000...: no environment
    assert proc.returncode == 1, proc.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["instances"] == 2 and summary["errors"] == 2 and summary["error_instances"] == ["calc-0", "calc-1"]
    assert "2 of 2 instance(s) errored" in proc.stderr and "Traceback" not in proc.stderr


def test_apply_messages_carry_no_terminal_escapes(checkout):
    patch = diff_of(checkout, lambda repo: os.symlink("/etc/passwd", repo / "evil\x1b]0;title\x07"))
    outcome = apply_patch(checkout, patch)
    assert not outcome.applied and "evil?]0;title? -> /etc/passwd" in outcome.message
    assert "\x1b" not in outcome.message and "\x07" not in outcome.message


def test_the_tui_diff_panel_shows_a_latin1_patch(tmp_path):
    from codeagent.tui.diff_panel import diff_content

    patch, _ = latin1_patch(tmp_path)
    shown = diff_content(patch).plain
    assert "+caf\ufffd br\ufffdl\ufffde" in shown
    shown.encode("utf-8")  # what the terminal gets: no lone surrogates
