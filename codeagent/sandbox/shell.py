"""One long-lived bash process driven over a byte stream, as a person drives a terminal.

Each command is handed to the shell in a quoted here-document and run with `eval`, so a syntax
error in it cannot desynchronise the session; the shell then prints a marker with a random nonce
carrying the exit code and the working directory. Working directory, variables and functions
persist between commands. After each command the exported environment is saved inside the
sandbox, so a shell that dies (`exit`, `exec`, a kill) is restarted with its cwd and environment.
"""

from __future__ import annotations

import secrets
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .errors import SandboxDead
from .output import BoundedOutput, PhraseWatch

DEFAULT_OUTPUT_LIMIT = 2 * 1024 * 1024
KILL_GRACE_SECONDS = 5.0


@dataclass
class CommandResult:
    output: str
    exit_code: int | None  # None when the command never reported one (killed with its shell)
    timed_out: bool
    seconds: float
    total_bytes: int = 0
    elided_bytes: int = 0
    shell_restarted: bool = False  # the shell died during the command and a new one was started
    seen: frozenset[str] = frozenset()  # the session's watched phrases that the output held (elided part too)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class Transport(Protocol):
    """A byte stream to a bash process: what the sandbox backends provide."""

    def send(self, data: bytes) -> None: ...

    def recv(self, timeout: float) -> bytes | None:
        """Bytes as they come; b"" at end of stream; None when `timeout` passes with nothing."""
        ...

    def close(self) -> None: ...

    def exit_code(self) -> int | None:
        """The shell's exit status once the stream has ended (None if unknown)."""
        ...


class ShellSession:
    """Drives a bash process over a transport. `open_transport` starts a fresh bash each call;
    `kill_children(pid, itself=False)` kills the process tree under the shell (from outside it; with
    `itself`, the shell too); `hard_reset()` is the last resort when even that fails (e.g. a fork bomb
    exhausted the pid limit)."""

    def __init__(self, open_transport: Callable[[], Transport], *, state_dir: str, workdir: str,
                 kill_children: Callable[..., bool], hard_reset: Callable[[], None],
                 output_limit: int = DEFAULT_OUTPUT_LIMIT):
        self._open_transport = open_transport
        self._kill_children = kill_children
        self._hard_reset = hard_reset
        self.state_dir = state_dir
        self.cwd = workdir
        self.output_limit = output_limit
        self.watch: tuple[str, ...] = ()  # phrases looked for in each command's output as it comes (CommandResult.seen)
        self._nonce = secrets.token_hex(8)
        self._marker = f"__CODEAGENT_{self._nonce}__".encode()
        self._transport: Transport | None = None
        self.pid: int | None = None
        self._running = False  # a command is being run (interrupt stops it with its shell)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, restore: bool = False) -> None:
        self._transport = self._open_transport()
        state = shlex.quote(self.state_dir)
        setup = [
            "exec 2>&1",
            "export PAGER=cat GIT_PAGER=cat TERM=dumb",
            f"mkdir -p {state}",
            f"[ -f {state}/env ] && . {state}/env >/dev/null 2>&1" if restore else ":",
            f"cd {shlex.quote(self.cwd)}",
        ]
        result = self._execute("\n".join(setup) + "\necho $$", timeout=30)
        if result.exit_code != 0 or not result.output.strip().isdigit():
            raise SandboxDead(f"the sandbox shell did not start: {result.output.strip()[-500:]}")
        self.pid = int(result.output.strip())

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    def interrupt(self) -> None:
        """Stop the running command as a whole, from any thread: its process tree and the shell that
        runs it, so that the rest of its command line (`sleep 40; echo woke`) never runs; the next
        command gets a new shell with the working directory and exported variables saved after the
        last finished one. With no command running, the shell's background jobs are killed."""
        pid = self.pid
        if not pid:
            return
        if not self._running:
            self._kill_children(pid)
        elif not self._kill_children(pid, itself=True):
            self._hard_reset()  # a fork bomb's runaways: as a stuck timed-out command

    @property
    def alive(self) -> bool:
        return self._transport is not None

    # -- commands ------------------------------------------------------------------------------

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        if self._transport is None:
            self.start(restore=True)
        result = self._execute(command, timeout)
        if self._transport is None:  # the shell died or could not be interrupted: start a new one
            self.close()
            self.start(restore=True)
            result.shell_restarted = True
        return result

    def _execute(self, command: str, timeout: float | None) -> CommandResult:
        assert self._transport is not None
        end = f"__CODEAGENT_EOF_{self._nonce}__"
        state = shlex.quote(self.state_dir)
        script = (
            f"IFS= read -r -d '' __codeagent_cmd <<'{end}'\n{command}\n{end}\n"
            'eval "$__codeagent_cmd" </dev/null\n'
            "__codeagent_ec=$?\n"
            # written over in place, not truncated (freeing the file's blocks on the container's overlay took
            # 1-3 ms a command, most of a short one's round trip): `return` ends the sourcing of it before
            # whatever an older, longer environment left after it
            f"{{ export -p; echo return; }} 1<>{state}/env 2>/dev/null\n"
            f"printf '%s %d %s\\n' '{self._marker.decode()}' \"$__codeagent_ec\" \"$PWD\"\n"
        )
        started = time.monotonic()
        output = BoundedOutput(self.output_limit)
        phrases = PhraseWatch(self.watch)
        deadline = started + timeout if timeout else None
        self._running = True
        try:
            self._transport.send(script.encode())
            status = self._read_until_marker(output, deadline, phrases)
        except BaseException:  # Ctrl-C mid-command: stop it with its shell, and start a clean one next time
            self.interrupt()
            self.close()
            raise
        finally:
            self._running = False
        timed_out = status == "timeout"
        if timed_out:
            interrupted = self._kill_children(self.pid) if self.pid else False
            status = (self._read_until_marker(output, time.monotonic() + KILL_GRACE_SECONDS, phrases)
                      if interrupted else "timeout")
            if status == "timeout":  # the shell itself is stuck (a builtin loop, a fork bomb)
                self._hard_reset()
                status = "eof"
        exit_code = None
        if isinstance(status, tuple):
            exit_code, self.cwd = status
        elif status == "eof":
            exit_code = None if timed_out else self._transport.exit_code()
            self.close()
        return CommandResult(
            output=output.text(),
            exit_code=exit_code,
            timed_out=timed_out,
            seconds=time.monotonic() - started,
            total_bytes=output.total,
            elided_bytes=output.elided,
            seen=frozenset(phrases.seen),
        )

    def _read_until_marker(self, output: BoundedOutput, deadline: float | None, phrases: PhraseWatch | None = None):
        """Feed output until the marker line: returns (exit_code, cwd), "eof" or "timeout".
        The last len(marker) - 1 bytes are held back (a marker may be split between reads); a chunk
        without the marker goes to `output` as it came, uncopied. `phrases` looks at each read up to the
        marker (a phrase holds no "_": none can end inside a marker's start, held back or not)."""
        assert self._transport is not None
        phrases = phrases or PhraseWatch(())
        marker = self._marker
        keep = len(marker) - 1
        pending = b""
        while True:
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                output.add(pending)
                return "timeout"
            chunk = self._transport.recv(wait if wait is not None else 3600.0)
            if chunk is None:
                continue
            if chunk == b"":
                output.add(pending)
                return "eof"
            seam = pending + chunk[:keep]  # a marker across the previous read and this one
            index = seam.find(marker)
            if index >= 0:  # it starts in the held-back bytes (looked at already): nothing of this read is output
                data = pending + chunk
            else:
                index = chunk.find(marker)
                phrases.feed(chunk, index if index >= 0 else None)
                if index < 0 and len(chunk) < keep:  # a short read: the held-back bytes are in both
                    seam = pending + chunk
                    output.add(seam[:-keep])
                    pending = seam[-keep:]
                    continue
                if index < 0:
                    output.add(pending)
                    output.add(memoryview(chunk)[:-keep])
                    pending = chunk[-keep:]
                    continue
                output.add(pending)
                data = chunk
            output.add(memoryview(data)[:index])
            line = data[index + len(marker):]
            while b"\n" not in line:
                more = self._transport.recv(5.0)
                if not more:
                    return "eof"
                line += more
            fields = line.split(b"\n", 1)[0].decode("utf-8", errors="replace").strip().split(" ", 1)
            return int(fields[0]), (fields[1] if len(fields) > 1 else self.cwd)


# Kills every descendant of a pid (with "itself" as $2, the pid too, stopped first): stop them all (so none can fork or be reparented while we
# look), re-scan until the tree stops growing, then SIGKILL. Plain sh + awk over /proc, so it
# works in any Linux image and on the host.
KILL_TREE_SCRIPT = r"""
root=$1
[ "$2" = itself ] && kill -STOP "$root" 2>/dev/null
descendants() {
  awk -v root="$root" '
    { line=$0; r=0
      for (i=length(line); i>0; i--) if (substr(line,i,1)==")") { r=i; break }
      pid=substr(line,1,index(line," ")-1); split(substr(line,r+2),f," "); kids[f[2]]=kids[f[2]] " " pid }
    END { q[1]=root; n=1; h=1
          while (h<=n) { p=q[h++]; m=split(kids[p],c," "); for (i=1;i<=m;i++) { q[++n]=c[i]; print c[i] } } }
  ' /proc/[0-9]*/stat 2>/dev/null
}
all=""
for round in 1 2 3 4 5 6 7 8 9 10; do
  new=$(descendants)
  [ -z "$new" ] && break
  kill -STOP $new 2>/dev/null
  all="$all $new"
  [ "$round" -gt 1 ] && [ "$new" = "$previous" ] && break
  previous=$new
done
[ "$2" = itself ] && all="$all $root"
[ -n "$all" ] && kill -KILL $all 2>/dev/null
exit 0
"""
