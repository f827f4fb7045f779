"""code.confined: file access beneath a root that no path, symlink or huge file can lead out of."""

from __future__ import annotations

import errno
import os

import pytest

from codeagent.code import confined
from codeagent.code.files import iter_source_files, read_source
from codeagent.code.index import RepoIndex


@pytest.fixture
def layout(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "pkg").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.py").write_text("def host_secret():\n    return 'SECRET'\n")
    (root / "pkg" / "core.py").write_text("def add(a, b):\n    return a + b\n")
    os.symlink(outside / "secret.py", root / "leak.py")
    os.symlink(outside, root / "leakdir")
    os.symlink("../../outside/secret.py", root / "pkg" / "relative_leak.py")
    assert (root / "pkg" / "relative_leak.py").read_text().startswith("def host_secret")
    return root, outside


@pytest.mark.parametrize("path", ["/etc/passwd", "../x", "pkg/../../x", "a/../../b", "", ".", "a\0b"])
def test_paths_that_leave_the_root_are_refused(path):
    with pytest.raises(confined.OutsideRoot):
        confined.clean_relative(path)


def test_clean_relative_normalizes():
    assert confined.clean_relative("./pkg//core.py") == "pkg/core.py"


@pytest.mark.parametrize("path", ["leak.py", "leakdir/secret.py", "pkg/relative_leak.py"])
def test_reads_never_follow_a_symlink(layout, path):
    root, _ = layout
    with pytest.raises((confined.OutsideRoot, OSError)):
        confined.read_bytes(root, path, 1000)
    assert read_source(root, path) is None
    assert confined.read_bytes(root, "pkg/core.py", 1000).startswith(b"def add")


def test_a_huge_file_is_refused_before_it_is_read(layout):
    root, _ = layout
    with open(root / "huge.py", "wb") as handle:
        handle.truncate(3 * 1024**3)  # sparse: 3 GiB that take no disk
    with pytest.raises(OSError) as caught:
        confined.read_bytes(root, "huge.py", 1_000_000)
    assert caught.value.errno == errno.EFBIG and "3,221,225,472 bytes" in str(caught.value)
    assert "huge.py" not in list(iter_source_files(root))


def test_writes_and_removals_stay_beneath_the_root(layout):
    root, outside = layout
    with pytest.raises(confined.OutsideRoot):
        confined.write_bytes(root, "leakdir/planted.py", b"x")
    with pytest.raises(confined.OutsideRoot):
        confined.write_bytes(root, "../outside/planted.py", b"x")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.py"]
    confined.write_bytes(root, "leak.py", b"replaced")  # replaces the link itself, not its target
    assert not (root / "leak.py").is_symlink() and (outside / "secret.py").read_text().startswith("def host_secret")
    confined.remove(root, "leakdir/secret.py")
    confined.remove(root, "pkg/relative_leak.py")
    confined.remove(root, "../outside/secret.py")
    assert (outside / "secret.py").exists() and not os.path.lexists(root / "pkg" / "relative_leak.py")


def test_copy_tree_links_regular_files_only_and_writes_never_touch_the_source(layout, tmp_path):
    root, _ = layout
    os.mkfifo(root / "pipe")
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    confined.copy_tree(root, mirror, 1_000_000)
    entries = sorted(str(p.relative_to(mirror)) for p in mirror.rglob("*"))
    assert entries == ["pkg", "pkg/core.py"]
    assert (mirror / "pkg" / "core.py").stat().st_ino == (root / "pkg" / "core.py").stat().st_ino
    confined.write_bytes(mirror, "pkg/core.py", b"def mul(a, b):\n    return a * b\n")
    assert (root / "pkg" / "core.py").read_text().startswith("def add")


def test_the_index_never_reads_through_a_symlink(layout):
    root, _ = layout
    index = RepoIndex(root)
    assert set(index.files) == {"pkg/core.py"}
    assert not index.find_definitions("host_secret")
    assert index.read_bytes("leak.py") == b""
