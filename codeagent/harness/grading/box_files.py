"""Small files written and read through an open sandbox's shell: the judge's and the pytest guard's
folders, in one command each (a write_file per file would cost a round trip to the engine each)."""

from __future__ import annotations

import base64
import shlex
from collections.abc import Mapping


def put(box, files: Mapping[str, str | bytes], mode: int = 0o644) -> None:
    """Write `files` (path -> content) in the sandbox in one command of its shell: a write_file each would
    cost a round trip to the engine each (most of a small run's judging time under load)."""
    lines = []
    for path, content in files.items():
        data = content.encode() if isinstance(content, str) else content
        quoted = shlex.quote(path)
        lines.append(f"base64 -d > {quoted} <<'CODEAGENT_JUDGE_EOF'\n{base64.b64encode(data).decode()}\n"
                     f"CODEAGENT_JUDGE_EOF\nchmod {mode:o} {quoted}")
    result = box.run("\n".join(lines), timeout=120)
    if result.exit_code != 0:
        raise OSError(f"the judge's files could not be written: {result.output[-300:]}")


def read(box, path: str) -> str:
    """A small file of the judge's folder, through the sandbox's shell ('' when it is not there)."""
    return box.run(f"cat {shlex.quote(path)} 2>/dev/null", timeout=120).output
