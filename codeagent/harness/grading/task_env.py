"""One task's environment: a fresh container of its instance image, where a patch is applied, test
files are put back or patched, the tests run and their log is graded: the steps of the one grading
flow (plan.py) that `eval`, the regression verifier and GRPO rollouts all run.

Plain data in and out: a Task, a patch (text), a test command; out come dicts, a TestRun and a
GradeReport, never a host path, so an executor can run it on another machine.

    with TaskEnvironment(task, image) as env:
        graded = run_plan(env, patch, plan)  # plan.py: apply, flags, test patch, run, verdict

A patch is applied as the official SWE-bench harness applies it (run_evaluation.py, GIT_APPLY_CMDS, 2025):
`git apply --verbose`, then `git apply --verbose --reject`, then `patch --batch --fuzz=5 -p1 -i`, each
judged by its exit code, each on the tree the previous attempt left (nothing is reset between them),
the first that exits 0 wins. The environment's own uncommitted edits of tracked files (a spec's
`pre_install`, e.g. sphinx's `sed` on tox.ini and setup.py) therefore stay: a patch that carries them
(made in such an environment) fails to apply, as it does officially. After a failed apply the tree
is left as the attempts left it, and nothing grades it (every caller stops there). (The newest
official harness resets between attempts, but on images that commit the environment's edits
since 2025: there too they stay. Ours leave them uncommitted.)

One deliberate difference: the `patch` fallback runs with `--forward`, so a patch is never applied
in reverse (`--batch` alone makes `patch` assume `-R` when a patch looks reversed or already
applied: a reversed gold patch would apply the fix). It follows that hunks `git apply --reject`
already applied make the fallback fail, where the official `patch` reverses them. The newer
official step that moves `*.orig` files back after an apply is not taken: it repairs that reversal,
which `--forward` never makes, and it would also undo a forward apply with fuzz (whose backups are
`.orig` files) or move a repository's own `.orig` files.
"""

from __future__ import annotations

import errno
import secrets
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...task import Task
from ..layers.services import CA_IN_SANDBOX, TLS_ENV, trust_script
from ..logs.parsers import parse_log
from ..specs.directives import patched_files
from .integrity import STATUS_COMMAND, changed_paths, flag_patch, status_entries
from .judge import Watch, verdict
from .verdict import ABORT_EXIT_CODES, GradeReport, grade

PATCH_DIR = "/tmp/codeagent-eval"
# Tried in order on what the previous attempt left; the first that exits 0 wins (as the official
# harness does; `--forward`: see the module docstring).
APPLY_COMMANDS = (
    "git apply --verbose {patch}",
    "git apply --verbose --reject {patch}",
    "patch --batch --forward --fuzz=5 -p1 -i {patch}",
)
PROGRESS_EVERY = 30.0  # seconds between progress reports of a running test command


@dataclass
class TestRun:
    log: str
    exit_code: int | None
    complete: bool
    timed_out: bool
    seconds: float
    judge: dict[str, Any] | None = None  # what the judge's observers recorded, by observer (judge/); None: not watched


@dataclass
class Applied:
    error: str | None  # what every attempt said, when none applied
    changed: list[str] = field(default_factory=list)  # what `git status` shows the patch changed
    applied_with: str | None = None


class TaskEnvironment:
    """A task in a container of `image` (no network; `services` are sidecars on an internal
    network, see layers/services.py). `limits`: the sandbox's (default: no network, 8g of memory).
    `box`: run in an existing sandbox instead (a rollout's own)."""

    def __init__(self, task: Task, image: str | None = None, *, services: Sequence[Any] = (), limits=None,
                 box=None, progress: Callable[[str], None] | None = None, workspace=None):
        self.task, self.image, self.services, self.limits = task, image, list(services), limits
        self.workspace = workspace  # the tree is in `image`, not on this machine (images/prebuilt.py)
        self.box = box
        self._stack: Any = None  # an ExitStack while this opened the sandbox
        self.progress = progress
        self._test_env = ""  # exports before the test command (the services' CA)

    def open(self) -> TaskEnvironment:
        if self.box is None:
            from contextlib import ExitStack

            from ...sandbox import Limits
            from ...sandbox.docker import DockerSandbox
            from ...sandbox.workspace import snapshot
            from ..layers.services import service_network

            self._stack = ExitStack()
            try:
                limits = self.limits or Limits(network=False, memory="8g")
                wanted = self.services and not limits.network  # with the network, the real services answer
                network, cas = self._stack.enter_context(service_network(self.services)) if wanted else (None, b"")
                box = DockerSandbox(self.workspace or snapshot(self.task.repo, self.task.base_commit),
                                    prepared_image=self.image,
                                    limits=limits, network_name=network)
                self.box = self._stack.enter_context(box)
                if cas:
                    self.box.write_file(CA_IN_SANDBOX, cas)
            except BaseException:
                self._stack.close()
                raise
        self.box.run(f"mkdir -p {PATCH_DIR}")
        if self.box.run(f"test -f {CA_IN_SANDBOX}").exit_code == 0:  # put there above, or when a rollout's was opened
            self._test_env = "".join(f"export {name}={CA_IN_SANDBOX}; " for name in TLS_ENV) + \
                trust_script(self.services)
        return self

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack, self.box = None, None

    def __enter__(self) -> TaskEnvironment:
        return self.open()

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- steps ---------------------------------------------------------------------------------------

    def apply(self, patch: str) -> Applied:
        """Apply the patch (an empty one applies trivially) and list the paths it changed. No attempt
        is undone (see the module docstring): after a failure, the environment is not to be graded."""
        if not patch.strip():
            return Applied(None, [], "(empty patch)")
        listing = f"{PATCH_DIR}/status-{secrets.token_hex(4)}"
        self.box.run(f"{STATUS_COMMAND} > {listing}-before 2>/dev/null", timeout=300)
        self.box.write_file(f"{PATCH_DIR}/model.patch", patch if patch.endswith("\n") else patch + "\n")
        errors = []
        for template in APPLY_COMMANDS:
            name = template.split(" {")[0]
            result = self.box.run(template.format(patch=f"{PATCH_DIR}/model.patch"), timeout=120)
            if result.exit_code == 0:
                return Applied(None, self._changed(listing), name)
            errors.append(f"$ {name}\n{result.output.strip()[-600:]}")
        return Applied("\n".join(errors))

    def _changed(self, listing: str) -> list[str]:
        self.box.run(f"{STATUS_COMMAND} > {listing}-after 2>/dev/null", timeout=300)
        try:
            before, after = (status_entries(self.box.read_file(f"{listing}-{when}").decode("utf-8", errors="replace"))
                             for when in ("before", "after"))
        except OSError:
            return []
        return changed_paths(before, after)

    def flags(self, patch: str, relied_on: Sequence[str], changed: Sequence[str] = ()) -> dict[str, str]:
        """The test infrastructure the patch touches (integrity.flag_patch), read against the base."""
        from ...patches.base import git_reader
        from ...sandbox.errors import WorkspaceError
        from ...sandbox.workspace import snapshot

        try:
            if self.workspace is not None:  # no base tree on this machine to read
                raise WorkspaceError("prebuilt image")
            snap = snapshot(self.task.repo, self.task.base_commit)
            reader = git_reader(snap.git_dir, snap.commit)
        except WorkspaceError:  # no base to read sections from: a changed settings file counts
            reader = None
        return flag_patch(patch, relied_on=list(relied_on), read_base=reader, extra_paths=list(changed))

    def reset(self, paths: Sequence[str]) -> None:
        """Put files back to their base version (a patch cannot make a test pass by editing it)."""
        for command in _reset_commands(paths, remove_new=False):
            self.box.run(command, timeout=120)

    def patch_tests(self, test_patch: str, timeout: float = 300) -> str | None:
        """Reset the files the test patch touches, then apply it; None, or why it did not apply."""
        if not test_patch:
            return None
        self.box.write_file(f"{PATCH_DIR}/test.patch", test_patch)
        prep = self.box.run(reset_and_patch_tests_script(test_patch, f"{PATCH_DIR}/test.patch"), timeout=timeout)
        return None if prep.exit_code == 0 else f"the test patch does not apply: {prep.output[-1500:]}"

    def run_tests(self, command: str, timeout: float, log_parser: str = "", test_files: Sequence[str] = ()) -> TestRun:
        """Run the test command watched by the judge's observers its command calls for (judge/: a go test
        gets a canary, pytest codeagent's plugin, ...); `test_files`: where the hidden tests are."""
        watch = Watch(self.box, PATCH_DIR, command, log_parser, test_files)
        exports = watch.install()
        run = run_tests(self.box, self._test_env + exports + command, timeout, progress=self.progress)
        if watch.observers:
            run.judge = watch.collect()
        return run

    def grade(self, run: TestRun, log_parser: str, f2p: Sequence[str] | None = None,
              p2p: Sequence[str] | None = None) -> GradeReport:
        """The official verdict on the run (the task's lists unless others are given), made unresolved
        when the log does not match what the judge's observers saw (judge/)."""
        f2p = self.task.FAIL_TO_PASS if f2p is None else list(f2p)
        p2p = self.task.PASS_TO_PASS if p2p is None else list(p2p)
        graded = grade(parse_log(log_parser, run.log), f2p, p2p, exit_code=run.exit_code, log_complete=run.complete,
                       timed_out=run.timed_out, abort_exit_codes=ABORT_EXIT_CODES.get(log_parser, frozenset()))
        return verdict(graded, run.judge, run.log, [*f2p, *p2p])


def _reset_commands(paths: Sequence[str], *, remove_new: bool) -> list[str]:
    from ...sandbox.workspace import BASE_TAG

    commands = []
    for path in paths:
        quoted = shlex.quote(path)
        otherwise = " || rm -f -- " + quoted if remove_new else ""
        commands.append(f"(git cat-file -e {BASE_TAG}:{quoted} 2>/dev/null && git checkout -q {BASE_TAG} -- {quoted}"
                        f"{otherwise})")
    return commands


def reset_and_patch_tests_script(test_patch: str, patch_file: str) -> str:
    """Put the files the test patch touches back to the base version, then apply the test patch."""
    return " && ".join([*_reset_commands(patched_files(test_patch), remove_new=True),
                        f"git apply --verbose {patch_file}"])


# The log is read whole (grading reads every line); the patch's code writes it, so it is capped.
# Over the cap the run counts as incomplete (never resolved): a cut log could hide a FAILED line.
MAX_LOG_BYTES = 256 * 2**20


def watched_run(box, command: str, log_parser: str, timeout: float, test_files: Sequence[str] = ()) -> TestRun:
    """Run `command` in `box` (an open sandbox) as a graded run is run, watched by the judge: its TestRun,
    whose `judge` holds what the observers saw (judge.judge_evidence() says what that means for given tests).
    For verifiers that run tests in a sandbox of their own (the reproduction test)."""
    box.run(f"mkdir -p {PATCH_DIR}")
    watch = Watch(box, PATCH_DIR, command, log_parser, test_files)
    run = run_tests(box, watch.install() + command, timeout)
    if watch.observers:
        run.judge = watch.collect()
    return run


def run_tests(box, command: str, timeout: float, progress: Callable[[str], None] | None = None) -> TestRun:
    """Run the test command with its output in a file (read whole: logs can be many MB) between
    markers that carry a nonce, so printed text cannot fake the end of the run. `progress` hears,
    every PROGRESS_EVERY seconds, the elapsed time and the log's last line."""
    nonce = secrets.token_hex(6)
    log_file = f"{PATCH_DIR}/test-{nonce}.log"
    script = (f"echo '>>>>> codeagent start {nonce}'; ( {command} ); "
              f"echo \">>>>> codeagent end {nonce} exit=$?\"")
    started = time.monotonic()
    with _watch(box, log_file, progress):
        result = box.run(f"( {script} ) > {log_file} 2>&1", timeout=timeout)
    seconds = time.monotonic() - started
    try:
        raw = box.read_file(log_file, max_bytes=MAX_LOG_BYTES).decode("utf-8", errors="replace")
    except FileNotFoundError:
        raw = result.output
    except OSError as exc:
        if exc.errno != errno.EFBIG:
            raise
        return TestRun(f"the test log is over {MAX_LOG_BYTES:,} bytes: it was not read\n", None, False,
                       result.timed_out, seconds)
    start_marker, end_marker = f">>>>> codeagent start {nonce}", f">>>>> codeagent end {nonce} exit="
    body = raw.split(start_marker, 1)[-1]
    exit_code, complete = None, False
    if end_marker in body:
        body, _, tail = body.rpartition(end_marker)
        digits = tail.strip().split()[0] if tail.strip() else ""
        exit_code, complete = (int(digits), True) if digits.lstrip("-").isdigit() else (None, False)
    return TestRun(body.strip("\n") + "\n", exit_code, complete and not result.timed_out, result.timed_out, seconds)


class _watch:
    """While the tests run: every PROGRESS_EVERY seconds, tell `progress` the elapsed time and the
    last line of the log (read with `docker exec`, beside the sandbox's shell, which is busy)."""

    def __init__(self, box, log_file: str, progress: Callable[[str], None] | None):
        self.box, self.log_file, self.progress = box, log_file, progress
        self._thread: Any = None

    def __enter__(self):
        import threading

        container = getattr(self.box, "container", None)
        if self.progress is None or container is None:
            return self
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._loop, args=(container,), daemon=True, name="test-progress")
        self._thread.start()
        return self

    def _loop(self, container) -> None:
        assert self.progress is not None  # __enter__ starts the loop only with one
        while not self._stop.wait(PROGRESS_EVERY):
            try:
                _, output = container.exec_run(["tail", "-c", "400", self.log_file])
                lines = output.decode("utf-8", errors="replace").strip().splitlines()
            except Exception:  # a report, never a reason to disturb the run
                lines = []
            last = "".join(ch if ch.isprintable() else "?" for ch in lines[-1][:160]) if lines else ""  # untrusted
            self.progress(f"tests running {time.monotonic() - self._started:.0f}s: {last}")

    def __exit__(self, *exc_info) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)


def report_dict(graded: GradeReport) -> dict[str, Any]:
    fields = graded.model_dump(mode="json")
    fields["outcome"] = graded.outcome.value if hasattr(graded.outcome, "value") else graded.outcome
    fields["tests_status"] = graded.to_swebench()
    return fields
