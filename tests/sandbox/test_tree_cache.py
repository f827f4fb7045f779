"""The host copies of trees (navigation, localization) are bounded: least recently used out first, old
ones out, a tree a mirror holds kept; `sandbox prune` clears the cache and what killed processes left."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from codeagent.private_dirs import private_root
from codeagent.sandbox import snapshot
from codeagent.sandbox.workspace import host_tree

DAY = 86400


def _trees(make_repo, count: int, size: int = 100_000) -> list:
    return [snapshot(str(make_repo({"blob.bin": os.urandom(size), "n.txt": str(n)}, name=f"r{n}")), None)
            for n in range(count)]


def trees_dir():
    return os.path.join(os.environ["CODEAGENT_CACHE"], "trees-nolinks")


def _age(tree, seconds: float) -> None:
    when = time.time() - seconds
    os.utime(tree, (when, when))


def test_the_cache_keeps_to_its_size_least_recently_used_out_first(make_repo, tmp_path, monkeypatch):
    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CODEAGENT_TREE_CACHE_SIZE", "250k")  # two trees of ~100 KB
    a, b, c, d = _trees(make_repo, 4)
    first, second = host_tree(a), host_tree(b)
    _age(first, 3 * 3600)
    _age(second, 2 * 3600)
    assert host_tree(a) == first  # used again: now the most recent
    _age(first, 3600)
    third = host_tree(c)  # over 250k: the least recently used (b) goes
    assert first.is_dir() and third.is_dir() and not second.exists()
    assert sorted(n for n in os.listdir(trees_dir()) if os.path.isdir(os.path.join(trees_dir(), n))) == sorted(
        [a.tree, c.tree])
    _age(first, 2 * 3600)
    _age(third, 3600)
    host_tree(d)
    assert not first.exists() and third.exists()  # a's last use is older than c's
    _age(os.path.join(trees_dir(), d.tree), 1800)
    host_tree(b)
    assert not third.exists() and os.path.isdir(os.path.join(trees_dir(), d.tree))


def test_old_trees_go_and_one_a_mirror_holds_stays(make_repo, tmp_path, monkeypatch):
    from codeagent.sandbox import tree_cache

    monkeypatch.setenv("CODEAGENT_CACHE", str(tmp_path / "cache"))
    a, b, c = _trees(make_repo, 3, size=1000)
    old, held = host_tree(a), host_tree(b)
    handle = tree_cache.hold(held)
    try:
        _age(old, 15 * DAY)  # past the default 14 days
        _age(held, 30 * DAY)
        host_tree(c)
        assert not old.exists() and held.is_dir()
    finally:
        handle.close()
    host_tree(a)
    assert not held.exists()  # released: now it goes


def test_prune_clears_the_tree_cache_and_what_killed_processes_left(make_repo, tmp_path):
    cache = tmp_path / "cache"
    env = {**os.environ, "CODEAGENT_CACHE": str(cache)}
    script = ("from codeagent.sandbox import snapshot; from codeagent.sandbox.workspace import host_tree; "
              f"print(host_tree(snapshot({str(make_repo({'a.py': 'x = 1'}))!r}, None)))")
    tree = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()
    assert os.path.isdir(tree)
    _age(tree, 3600)
    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    killed.kill()
    killed.wait()
    left = [private_root() / f"{kind}-{killed.pid}-lh{n}" for n, kind in enumerate(("mirror", "grade"))]
    mine = private_root() / f"mirror-{os.getpid()}-lhlive"
    for path in [*left, mine]:
        (path / "src").mkdir(parents=True)
    try:
        proc = subprocess.run([sys.executable, "-m", "codeagent.cli", "sandbox", "prune"], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert "1 cached tree(s)" in proc.stdout
        assert not os.path.exists(tree) and not any(path.exists() for path in left)
        assert mine.is_dir()  # its owner (this test) is alive
    finally:
        import shutil

        for path in [*left, mine]:
            shutil.rmtree(path, ignore_errors=True)
