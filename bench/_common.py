"""Small helpers shared by the benchmarks: a throwaway repository and percentile summaries."""

from __future__ import annotations

import statistics
import subprocess
import tempfile
from pathlib import Path

GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@b", "PATH": "/usr/bin:/bin:/usr/local/bin"}


def scratch_repo(files: int = 200) -> Path:
    """A git repository with `files` small Python files (a stand-in for a real project)."""
    root = Path(tempfile.mkdtemp(prefix="codeagent-bench-"))
    for index in range(files):
        (root / f"pkg{index % 10}").mkdir(exist_ok=True)
        (root / f"pkg{index % 10}" / f"mod{index}.py").write_text(f"def f{index}(x):\n    return x + {index}\n" * 20)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "bench"]):
        subprocess.run(cmd, cwd=root, check=True, env=GIT_ENV)
    return root


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(values: list[float]) -> str:
    return (f"p50 {statistics.median(values) * 1000:8.2f} ms   p90 {percentile(values, 0.9) * 1000:8.2f} ms   "
            f"n={len(values)}")
