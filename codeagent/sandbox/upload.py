"""A file's bytes into the sandbox through its shell: base64 in a here-document, decoded in the container.

A small file (a patch, an edit) this way costs one command round trip, about a millisecond, where the
engine's archive upload (`put_archive`) costs ~0.1 s; the grading of an instance writes four. Larger files,
and images without a `base64` command, go through the engine as before."""

from __future__ import annotations

import base64

from .shell import ShellSession

SHELL_UPLOAD_MAX = 4 << 20  # bytes; above it the engine's archive upload
NO_BASE64 = 97  # the exit code when the image has no base64 command


def upload_through_shell(shell: ShellSession, upload_path: str, payload: bytes) -> bool:
    """Write `payload` at `upload_path` (quoted by the caller's rules: a plain path of ours). True when done;
    False when this way cannot be used (too large, no base64 in the image): the caller uploads otherwise.
    The base64 alphabet cannot contain the here-document's end line."""
    if len(payload) > SHELL_UPLOAD_MAX:
        return False
    encoded = base64.encodebytes(payload).decode("ascii")
    result = shell.run(f"( command -v base64 >/dev/null 2>&1 || exit {NO_BASE64}\n"  # a subshell: exit ends it only
                       f"base64 -d > {upload_path} <<'__CODEAGENT_UPLOAD__' || {{ rm -f {upload_path}; exit 1; }}\n"
                       f"{encoded}__CODEAGENT_UPLOAD__\n)", timeout=60)
    if result.exit_code == 0:
        return True
    if result.exit_code != NO_BASE64:
        raise OSError(f"could not write in the sandbox: {result.output.strip()[-500:]}")
    return False
