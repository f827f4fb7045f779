"""Make folder OLD hold exactly what folder NEW holds, writing only what differs; then remove NEW.

Run inside a layer's container (stdlib only, `python3 -S tree_sync.py NEW OLD`, layer.py): OLD is a
folder the parent image already holds, so an entry left alone is not copied into the new layer (the
layer holds the difference, not a second copy). An entry differs when its kind, permission bits,
link target or bytes differ (a .pyc's recorded source time aside); what NEW lacks is removed from OLD.
Times, owners, hard links and extended attributes are not compared: an entry kept has OLD's.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import stat
import sys


def kind(path: str) -> tuple[int, int] | None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    return stat.S_IFMT(mode), 0 if stat.S_ISLNK(mode) else stat.S_IMODE(mode)


def same(new: str, old: str) -> bool:
    if kind(new) != kind(old):
        return False
    if os.path.islink(new):
        return os.readlink(new) == os.readlink(old)
    if new.endswith(".pyc"):
        return same_bytecode(new, old)
    return os.path.isdir(new) or filecmp.cmp(new, old, shallow=False)


def same_bytecode(new: str, old: str) -> bool:
    """Two .pyc files that differ only in the source's time and size their header records (bytes
    8-16) hold the same code: the one kept records the time of the source kept beside it (where that
    source was replaced by one compiling to the same code, Python compiles it again on import)."""
    with open(new, "rb") as a, open(old, "rb") as b:
        first, second = a.read(), b.read()
    return len(first) == len(second) >= 16 and first[:8] == second[:8] and first[16:] == second[16:]


def remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def sync(new: str, old: str) -> int:
    """The number of entries written or removed in `old`."""
    for top in (new, old):
        if os.path.islink(top) or not os.path.isdir(top):
            raise SystemExit(f"tree sync: {top} is not a folder")
    changed = 0
    for root, dirs, files in os.walk(old, topdown=True):
        for name in sorted(dirs + files):
            path = os.path.join(root, name)
            wanted, present = kind(os.path.join(new, os.path.relpath(path, old))), kind(path)
            if wanted is None or present is None or wanted[0] != present[0]:
                remove(path)
                changed += 1
        dirs[:] = [name for name in dirs if os.path.isdir(os.path.join(root, name))
                   and not os.path.islink(os.path.join(root, name))]
    for root, dirs, files in os.walk(new, topdown=True):
        for name in sorted(dirs + files):
            path = os.path.join(root, name)
            target = os.path.join(old, os.path.relpath(path, new))
            if same(path, target):
                continue
            changed += 1
            if os.path.isdir(path) and not os.path.islink(path):
                if kind(target) is None:
                    os.mkdir(target)
                os.chmod(target, stat.S_IMODE(os.lstat(path).st_mode))
            else:
                if kind(target) is not None:
                    remove(target)
                if os.path.islink(path):
                    os.symlink(os.readlink(path), target)
                else:
                    shutil.copy2(path, target)
    shutil.rmtree(new)
    return changed


if __name__ == "__main__":
    print(f"tree sync: {sync(sys.argv[1], sys.argv[2])} entries written or removed")
