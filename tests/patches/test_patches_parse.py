"""The one diff reader (codeagent/patches/parse.py), on diffs real git writes and on hand-made ones."""

from __future__ import annotations

import subprocess

from codeagent import patches
from codeagent.patches import parse
from tests.support.git import git

LATIN = b"lat\xe9.txt"  # a Latin-1 file name: not UTF-8


def test_quoted_paths_from_real_git_keep_their_bytes(make_repo):
    repo = make_repo({"café.py": "x = 1\n", "tests/test_é.py": "def test_a():\n    pass\n"})
    (repo / "tests/test_é.py").write_text("def test_a():\n    assert 1\n")
    with open(bytes(repo) + b"/" + LATIN, "wb") as handle:
        handle.write(b"a\n")
    git(repo, "add", "-A")
    git(repo, "mv", "café.py", "renamed é.py")
    patch = patches.decode(subprocess.run(["git", "diff", "--cached", "-M", "HEAD"], cwd=repo, check=True,
                                          capture_output=True).stdout)
    assert '"a/caf\\303\\251.py"' in patch and '"b/lat\\351.txt"' in patch  # git quoted them

    found = {(diff.old, diff.new) for diff in parse(patch)}
    latin = patches.decode(LATIN)
    assert found == {("café.py", "renamed é.py"), (None, latin), ("tests/test_é.py", "tests/test_é.py")}
    assert patches.encode(latin) == LATIN  # the exact bytes, not U+FFFD
    renamed = next(diff for diff in parse(patch) if diff.new == "renamed é.py")
    assert renamed.header == ("café.py", "renamed é.py")


def test_renames_copies_binary_and_header_only_files():
    patch = ('diff --git a/old name.py b/new name.py\nsimilarity index 100%\nrename from old name.py\n'
             'rename to new name.py\n'
             'diff --git a/src/x.py b/src/y.py\nsimilarity index 90%\ncopy from src/x.py\ncopy to src/y.py\n'
             'diff --git a/logo.png b/logo.png\nindex 1..2 100644\nBinary files a/logo.png and b/logo.png differ\n'
             'diff --git a/empty.txt b/empty.txt\nnew file mode 100644\nindex 0..e69de29\n'
             'diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\nindex e69de29..0\n'
             'diff --git a/a b/c.py b/a b/c.py\nold mode 100644\nnew mode 100755\n')
    assert [(d.old, d.new, d.binary) for d in parse(patch)] == [
        ("old name.py", "new name.py", False), ("src/x.py", "src/y.py", False), ("logo.png", "logo.png", True),
        (None, "empty.txt", False), ("gone.txt", None, False), ("a b/c.py", "a b/c.py", False)]
    assert patches.files(patch) == ["old name.py", "new name.py", "src/x.py", "src/y.py", "logo.png", "empty.txt",
                                    "gone.txt", "a b/c.py"]


def test_hunks_have_their_line_numbers_and_body_counted_off_the_header():
    patch = ("--- a/f.txt\t2024-01-01 00:00:00\n+++ b/f.txt\t2024-01-01 00:00:01\n"
             "@@ -3,3 +3,2 @@ def area(r):\n x = 1\n--- y\n-z\n\\ No newline at end of file\n"
             "@@ -10 +9,2 @@\n-old\n+++ new\n+more\n"
             "--- orig/g.py\n+++ new/g.py\n@@ -1 +1 @@\n-a\n+b\n")
    first, second = parse(patch)
    assert (first.old, first.new, first.header) == ("f.txt", "f.txt", None)
    assert [(h.old_start, h.old_count, h.new_start, h.new_count, h.context) for h in first.hunks] == [
        (3, 3, 3, 2, "def area(r):"), (10, 1, 9, 2, "")]
    assert first.hunks[0].lines == [" x = 1", "--- y", "-z"]
    assert first.hunks[1].lines == ["-old", "+++ new", "+more"]
    assert (second.old, second.new) == ("g.py", "g.py")  # -p1, as git apply reads a plain diff


def test_escapes_in_quoted_names_and_a_hunk_shorter_than_its_header():
    patch = ('diff --git "a/say \\"hi\\"\\tnow.txt" "b/say \\"hi\\"\\tnow.txt"\n'
             '--- "a/say \\"hi\\"\\tnow.txt"\n+++ "b/say \\"hi\\"\\tnow.txt"\n@@ -1,5 +1,5 @@\n-a\n+b\n'
             "diff --git a/next.py b/next.py\n--- a/next.py\n+++ b/next.py\n")
    first, second = parse(patch)
    assert first.paths == ['say "hi"\tnow.txt'] and first.hunks[0].lines == ["-a", "+b"]
    assert second.paths == ["next.py"]  # not swallowed by the short hunk above


# ------------------------------------------------------------- the readers of diffs that use it

def _real_diff(repo, **writes: str) -> str:
    for path, text in writes.items():
        (repo / path).write_text(text)
    return patches.decode(subprocess.run(["git", "diff"], cwd=repo, check=True, capture_output=True).stdout)


def test_test_directives_of_a_quoted_test_patch(make_repo):
    from codeagent.harness.specs.directives import patched_files, test_files

    repo = make_repo({"tests/test_é.py": "def test_a():\n    pass\n", "tests/data é.json": "{}\n"})
    test_patch = _real_diff(repo, **{"tests/test_é.py": "def test_a():\n    assert 1\n", "tests/data é.json": "[]\n"})
    assert test_files(test_patch) == ["tests/test_é.py"]  # was the quoted text: tests/test_\303\251.py
    assert patched_files(test_patch) == ["tests/data é.json", "tests/test_é.py"]


def test_a_candidate_on_a_non_ascii_file_gets_a_normalization_key(make_repo):
    from codeagent.patches.base import git_reader
    from codeagent.scaling.normalize import normalize

    repo = make_repo({"café.py": "def f():\n    return 1\n"})
    read = git_reader(repo / ".git", "HEAD")
    fix = _real_diff(repo, **{"café.py": "def f():\n    return 2\n"})
    git(repo, "checkout", "--", ".")
    reformatted = _real_diff(repo, **{"café.py": "def f():\n    return (2)  # fixed\n"})
    first, second = normalize(fix, read), normalize(reformatted, read)
    assert first.reason is None and first.files == {"café.py": "def f():\n    return 2"}  # was: does not apply
    assert first.key == second.key


def test_a_candidate_symlink_is_never_followed_on_the_host(make_repo, tmp_path):
    from codeagent.patches.base import git_reader
    from codeagent.scaling.normalize import normalize

    secret = tmp_path / "host-secret.txt"
    secret.write_text("password = hunter2\n")
    repo = make_repo({"calc.py": "x = 1\n"})
    (repo / "leak.py").symlink_to(secret)
    (repo / "calc.py").write_text("x = 2\n")
    git(repo, "add", "-A")
    patch = patches.decode(subprocess.run(["git", "diff", "--cached"], cwd=repo, check=True,
                                          capture_output=True).stdout)
    result = normalize(patch, git_reader(repo / ".git", "HEAD"))
    assert result.key is not None and "hunter2" not in repr(result.files) and "hunter2" not in repr(result.features)
    assert str(secret) in result.files["leak.py"]  # the link's own text, as git stores it


def test_similarity_reward_files_deletions_under_their_own_names():
    from codeagent.train.grpo.rewards import patch_similarity

    def deletion(path: str) -> str:
        return (f"diff --git a/{path} b/{path}\ndeleted file mode 100644\n--- a/{path}\n+++ /dev/null\n"
                "@@ -1 +0,0 @@\n-x = 1\n")

    edit = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    assert patch_similarity(edit, edit) == 1.0 and patch_similarity(deletion("a.py"), deletion("a.py")) == 1.0
    assert patch_similarity(deletion("a.py"), deletion("b.py")) == 0.0  # was 1.0: both filed as /dev/null
