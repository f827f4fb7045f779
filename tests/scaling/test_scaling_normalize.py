"""Patch normalization: equivalent patches share a key, different ones do not, unusable ones are discarded."""

from __future__ import annotations

import re

from codeagent.patches.base import git_reader, tree_reader
from codeagent.scaling.normalize import EMPTY, NO_CHANGE, NOT_APPLYING, diff_key, normalize, normalized_key
from codeagent.scaling.scratch import touched_files
from codeagent.scaling.similarity import diff_features, similarity
from codeagent.scaling.types import Candidate
from codeagent.scaling.votes import annotate, group_candidates
from tests.support.calc_edits import (
    BASE,
    FILES,
    FIX,
    FIX_COMMENTED,
    FIX_REFORMATTED,
    MUL_CHANGE,
    OTHER_FIX,
    README,
    diff,
    read,
)
from tests.support.git import git

FIX_NEW_DOCSTRING = FIX.replace('"""Add two numbers."""', "'''Return the sum of a and b.'''")
FIX_BLANK_LINES = FIX.replace("\n\n\ndef mul", "\n\ndef mul")
COMMENT_ONLY = BASE.replace("    return a - b", "    # TODO: check\n    return a - b")


def test_equivalent_patches_share_a_key():
    keys = {name: normalized_key(diff("calc.py", text), read) for name, text in {
        "fix": FIX, "commented": FIX_COMMENTED, "reformatted": FIX_REFORMATTED,
        "docstring": FIX_NEW_DOCSTRING, "blank_lines": FIX_BLANK_LINES}.items()}
    assert keys["fix"] is not None
    assert set(keys.values()) == {keys["fix"]}, keys


def test_different_patches_stay_apart():
    fix = normalized_key(diff("calc.py", FIX), read)
    other = normalized_key(diff("calc.py", OTHER_FIX), read)
    both = normalized_key(diff("calc.py", FIX) + diff("README.md", README + "\nNow it adds.\n"), read)
    assert None not in (fix, other, both)
    assert len({fix, other, both}) == 3


def test_without_git_header_and_with_offset_hunks():
    fix = normalized_key(diff("calc.py", FIX), read)
    plain = diff("calc.py", FIX, git_header=False)
    assert not plain.startswith("diff --git")
    assert normalized_key(plain, read) == fix
    shifted = re.sub(r"@@ -\d+,(\d+) \+\d+,(\d+) @@", r"@@ -9,\1 +9,\2 @@", plain)  # wrong line numbers
    assert shifted != plain and normalized_key(shifted, read) == fix
    # a context line that differs: git apply refuses, patch --fuzz applies it (as the harness does)
    fuzzy = shifted.replace("\n def mul(a, b):\n", "\n def mul(a, c):\n")
    assert fuzzy != shifted and normalized_key(fuzzy, read) == fix


def test_unusable_patches_are_discarded():
    assert normalize("", read).reason == EMPTY
    assert normalize("   \n", read).reason == EMPTY
    stale = diff("calc.py", FIX).replace("-    return a - b", "-    return a ** b")  # context the base lacks
    assert normalize(stale, read).key is None and normalize(stale, read).reason.startswith(NOT_APPLYING)
    missing = diff("nowhere.py", "x = 1\n", old="x = 0\n")
    assert normalize(missing, read).reason.startswith(NOT_APPLYING)
    assert normalize(diff("calc.py", COMMENT_ONLY), read).reason == NO_CHANGE
    assert normalize("this is not a diff\n", read).key is None


def test_whitespace_of_other_files_and_test_files():
    spaced = README.replace("Adds numbers.", "Adds   numbers.  ") + "\n\n"
    assert normalize(diff("README.md", spaced), read).reason == NO_CHANGE
    with_tests = diff("calc.py", FIX) + diff("tests/test_calc.py", FILES["tests/test_calc.py"] + "\n\ndef test_add():\n"
                                                                 "    assert add(2, 3) == 5\n")
    assert normalized_key(with_tests, read) == normalized_key(diff("calc.py", FIX), read)
    assert normalized_key(with_tests, read, ignore_tests=False) != normalized_key(diff("calc.py", FIX), read)
    new_module = diff("helpers.py", "def helper():\n    return 1\n", old=None)
    assert normalize(new_module, read).files == {"helpers.py": "def helper():\n    return 1"}
    deleted = diff("calc.py", None)
    assert normalize(deleted, read).files == {"calc.py": None}


def test_unparsable_python_is_compared_as_text():
    broken = diff("calc.py", BASE.replace("return a - b", "return a +"))
    broken_spaced = diff("calc.py", BASE.replace("return a - b", "return  a +"))
    assert normalized_key(broken, read) == normalized_key(broken_spaced, read) is not None
    assert normalized_key(broken, read) != normalized_key(diff("calc.py", FIX), read)


def test_touched_files_reads_hunks_by_their_counts():
    old = "x = 1\n-- y\n"
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n x = 1\n--- y\n+++ z\n"  # body lines that look like headers
    assert [(f.old, f.new) for f in touched_files(patch)] == [("f.txt", "f.txt")]
    assert normalize(patch, lambda p: old.encode() if p == "f.txt" else None).files == {"f.txt": "x = 1\n++ z"}


def test_group_and_annotate_candidates():
    patches = [diff("calc.py", FIX), diff("calc.py", OTHER_FIX), "", diff("calc.py", FIX_COMMENTED),
               diff("calc.py", FIX).replace("return a - b", "return a // b")]
    candidates = [Candidate(instance_id="t", index=i, patch=p) for i, p in enumerate(patches)]
    groups = group_candidates(candidates, read)
    assert sorted(groups.values()) == [[0, 3], [1]]
    assert all("normalized" not in c.details for c in candidates)  # group_candidates copies
    assert annotate(candidates, read) == groups
    assert candidates[2].details["discarded"] == EMPTY and not candidates[2].usable
    assert candidates[4].details["discarded"].startswith(NOT_APPLYING)
    assert candidates[0].details["normalized"] == candidates[3].details["normalized"]


def test_diff_key_without_a_tree():
    assert diff_key("") is None
    a = diff("calc.py", FIX)
    assert diff_key(a) == diff_key(a.replace("+    return a + b", "+    return a  +  b"))
    assert diff_key(a) != diff_key(diff("calc.py", OTHER_FIX))


def test_readers(make_repo):
    repo = make_repo(FILES)
    commit = git(repo, "rev-parse", "HEAD").strip()
    key = normalized_key(diff("calc.py", FIX), read)
    assert normalized_key(diff("calc.py", FIX), git_reader(repo / ".git", commit)) == key
    assert normalized_key(diff("calc.py", FIX), tree_reader(repo)) == key
    assert tree_reader(repo)("../etc/passwd") is None


def test_features_and_similarity():
    fix, other, mul = (normalize(diff("calc.py", text), read).features for text in (FIX, OTHER_FIX, MUL_CHANGE))
    assert fix["scopes"] == ["calc.py:add"] and mul["scopes"] == ["calc.py:mul"]
    assert fix["tokens"] == {"-return": 1, "-a": 1, "--": 1, "-b": 1, "+return": 1, "+a": 1, "++": 1, "+b": 1}
    assert similarity(fix, fix) == 1.0
    assert similarity(fix, other) > 0.9  # same function, same tokens in another order
    assert similarity(fix, mul) < 0.3 and similarity(fix, mul) == similarity(mul, fix)
    assert similarity({}, fix) == 0.0
    from_text = diff_features(diff("calc.py", FIX))
    assert from_text["scopes"] == ["calc.py:"]  # the hunk starts at line 1: no enclosing def in its header
    assert from_text["tokens"]["+return"] == 1
    candidates = [Candidate(instance_id="t", index=0, patch=diff("calc.py", FIX))]
    annotate(candidates, read)
    assert candidates[0].details["features"] == fix
