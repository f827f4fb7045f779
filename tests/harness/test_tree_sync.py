"""tree_sync.py: OLD ends up holding exactly NEW, and what already matched is never written again."""

from __future__ import annotations

import os
import stat

from codeagent.harness.layers.tree_sync import sync


def tree(root, entries: dict) -> None:
    for path, value in entries.items():
        full = root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, tuple) and value[0] == "link":
            os.symlink(value[1], full)
        elif value is None:
            full.mkdir(exist_ok=True)
        else:
            text, mode = value if isinstance(value, tuple) else (value, 0o644)
            full.write_text(text)
            full.chmod(mode)


def listing(root) -> dict:
    found = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(mode):
                found[rel] = ("dir", stat.S_IMODE(mode))
            else:
                found[rel] = (open(path).read(), stat.S_IMODE(mode))
    return found


def test_old_becomes_new_and_untouched_files_keep_their_inode(tmp_path):
    new, old, expected = tmp_path / "new", tmp_path / "old", tmp_path / "expected"
    layout_new = {"same.txt": "same", "changed.txt": "after", "mode.sh": ("run", 0o755), "added/deep/a.txt": "a",
                  "link": ("link", "same.txt"), "retarget": ("link", "changed.txt"), "was_file": None,
                  "was_dir": "now a file", "docs/common": ("link", "../added")}
    tree(new, layout_new)
    tree(expected, layout_new)
    tree(old, {"same.txt": "same", "changed.txt": "before", "mode.sh": ("run", 0o644), "gone/x.txt": "x",
               "link": ("link", "same.txt"), "retarget": ("link", "same.txt"), "was_file": "file",
               "was_dir/inner.txt": "i", "docs/common/stale.txt": "s", "future.txt": "the fix"})
    untouched = os.lstat(old / "same.txt").st_ino
    written = sync(str(new), str(old))
    assert listing(old) == listing(expected)
    assert os.lstat(old / "same.txt").st_ino == untouched and not new.exists()
    # removed: gone, future.txt, was_file, was_dir, docs/common; written: changed.txt, mode.sh, added,
    # added/deep, added/deep/a.txt, retarget, was_file, was_dir, docs/common
    assert written == 14
    assert sync(str(expected), str(old)) == 0  # nothing left to write


def test_bytecode_that_differs_only_in_its_recorded_source_time_is_kept(tmp_path):
    new, old = tmp_path / "new", tmp_path / "old"
    header = b"\x6f\x0d\x0d\x0a" + bytes(4)
    new.mkdir()
    old.mkdir()
    (new / "a.pyc").write_bytes(header + b"\x01\x00\x00\x00\x10\x00\x00\x00" + b"code")
    (old / "a.pyc").write_bytes(header + b"\x02\x00\x00\x00\x10\x00\x00\x00" + b"code")
    (new / "b.pyc").write_bytes(header + b"\x01\x00\x00\x00\x10\x00\x00\x00" + b"code")
    (old / "b.pyc").write_bytes(header + b"\x01\x00\x00\x00\x10\x00\x00\x00" + b"edoc")
    assert sync(str(new), str(old)) == 1
    assert (old / "a.pyc").read_bytes()[8:12] == b"\x02\x00\x00\x00" and (old / "b.pyc").read_bytes().endswith(b"code")


def test_a_link_in_place_of_either_folder_is_refused(tmp_path):
    import pytest

    (tmp_path / "real").mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "link")
    for new, old in (("link", "real"), ("real", "link"), ("real", "missing")):
        with pytest.raises(SystemExit, match="is not a folder"):
            sync(str(tmp_path / new), str(tmp_path / old))
    assert os.listdir(tmp_path / "elsewhere") == []
