"""What each running instance of a batch is doing (cloning, building the environment, running the
agent, testing), for the progress display.

A worker appends each phase its instance enters to a small file in the instance's directory; the
driver reads the files of the instances in flight (their last line is what they do now, the file's
time when they began it) and removes a file once its instance is done. Files, not a queue: local
workers are separate processes, and the driver clears an instance's file before it starts it, so
a worker killed mid-phase leaves nothing stale behind.
"""

from __future__ import annotations

import time
from pathlib import Path

PHASE_FILE = ".phase"


def set_phase(instance_dir: Path, text: str) -> None:
    instance_dir.mkdir(parents=True, exist_ok=True)
    with open(instance_dir / PHASE_FILE, "a", encoding="utf-8") as out:
        out.write(text.replace("\n", " ") + "\n")


def clear_phase(instance_dir: Path) -> None:
    (instance_dir / PHASE_FILE).unlink(missing_ok=True)


def phases_of(instance_dir: Path) -> list[str]:
    """The phases the instance went through, in order (none: not started, or done)."""
    try:
        return (instance_dir / PHASE_FILE).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []


def running(instances_dir: Path) -> dict[str, tuple[list[str], float]]:
    """{instance: (its phases so far, seconds in the last one)} for the instances with phases and no
    report yet."""
    found = {}
    now = time.time()
    for path in instances_dir.glob(f"*/{PHASE_FILE}"):
        try:
            phases, since = path.read_text(encoding="utf-8").splitlines(), path.stat().st_mtime
        except OSError:  # finished between the glob and the read
            continue
        if phases and not (path.parent / "report.json").exists():
            found[path.parent.name] = (phases, max(0.0, now - since))
    return found
