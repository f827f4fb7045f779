"""Grade this patch on this task: the per-instance report every front end stores (`eval grade|run`,
GRPO's harness grader, `traj grade`), here or on a Ray node (`grade_shipped`), and GRPO's sandbox
grader (`grade_in_sandbox`). The images come from the task's source (env_images.py), the steps
from the one flow (grading/plan.py, through env_tests.py).

The report: `instance_id`, the image facts (what was built or pulled), how the patch applied, the
test infrastructure it touches, the verdict (GradeReport's fields, `outcome`, `tests_status`),
which failing tests tried to reach the network (built, offline environments), `seconds` (the
grading container; `phase_seconds`: its steps, start to stop) and `total_seconds` (images included). The test log goes to
output_dir/test_output.txt. Outcomes are distinct: `patch_apply_failed`, `timeout` and
`harness_error` are never reported as `unresolved`; images that cannot be had are a harness_error
with a one-line reason, never an exception.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from ..task import Task
from ..visible import visible
from .env_images import built_images, image_source
from .env_tests import run_plan_in_image
from .grading.plan import grade_in, own_plan
from .grading.task_env import TaskEnvironment, report_dict
from .grading.verdict import Outcome, not_run

Progress = Callable[[str], None]


def grade_patch(task: Task, patch: str, output_dir: Path | None = None, *, phase: Progress | None = None,
                progress: Progress | None = None) -> dict[str, Any]:
    """Get (build or pull) the task's images and grade `patch` in a fresh container: the report.
    `phase(text)` hears what is going on (building, testing); `progress(line)` the test run's."""
    started = time.monotonic()
    source = image_source(task)
    report: dict[str, Any] = {"instance_id": task.instance_id, **source.facts()}
    try:
        grading = source.grading(output_dir, phase)
    except Exception as error:
        verdict = not_run(Outcome.HARNESS_ERROR, task.FAIL_TO_PASS, task.PASS_TO_PASS, reason="")
        report.update({**report_dict(verdict), **source.unavailable(error)})
        log = None
    else:
        if phase is not None:
            phase("testing")
        testing = time.monotonic()
        graded = run_plan_in_image(task, grading.plan, patch, image=grading.image, services=grading.services,
                                   workspace=grading.workspace, progress=progress, reason=source.reason)
        report.update({**grading.facts, **graded.report(), "seconds": round(time.monotonic() - testing, 2)})
        log = graded.log
    report["total_seconds"] = round(time.monotonic() - started, 2)
    if output_dir is not None and log is not None:
        output_dir.mkdir(parents=True, exist_ok=True)
        (output_dir / "test_output.txt").write_text(log)
    return report


def grade_in_sandbox(box, task: Task, patch: str | None = None, *, harness: bool = False) -> dict[str, Any]:
    """The grade in `box`: a FRESH sandbox of the rollout's environment, never the one the run worked
    in. Nothing the model left behind there reaches the tests: shell functions, aliases, exported
    variables, its working directory, processes it left running, files it wrote outside the
    repository (a wrapper on PATH, a sitecustomize.py); only its patch comes across, as text.
    `harness`: graded as the harness grades the task (its spec's command, parser and services);
    else by the task's own `test_command`."""
    if harness:
        source = built_images(task)  # a pulled task is graded in its grading image (sandbox_grades)
        plan, services = source.plan(), source.services
    else:
        plan, services = own_plan(task), []
    graded = grade_in(lambda: TaskEnvironment(task, box=box, services=services), patch or "", plan)
    return graded.report()


def say(instance_id: str, line: str) -> None:
    """A progress line of a long test run, on stderr (workers share the terminal)."""
    import sys

    print(visible(f"[{instance_id.replace(chr(10), ' ')}] {line}"), file=sys.stderr, flush=True)  # untrusted both


def grade_shipped(job: tuple[dict, str]) -> dict:
    """Grade on whichever machine runs this (a Ray worker node), in a scratch directory of its own:
    only plain data comes back, the report and the files the grading wrote (test output, build logs)."""
    import shutil

    from ..private_dirs import make_private_dir, remove_dead_owners

    task_data, patch = job
    task = Task.model_validate(task_data)
    remove_dead_owners("grade")  # the scratch of a worker that was killed mid-grade
    scratch = make_private_dir("grade")
    try:
        report = grade_patch(task, patch, scratch, progress=lambda line: say(task.instance_id, line))
        return {"report": report, "files": collect_files(scratch)}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


SHIPPED_FILE_LIMIT = 32 * 1024 * 1024  # a test log can be many MB; beyond this only its end comes back


def collect_files(root: Path, skip: Collection[str] = ()) -> dict[str, bytes]:
    """The regular files under `root` by relative path (symbolic links, and files named in `skip`, left out)."""
    files = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file() or path.name in skip:
            continue
        with open(path, "rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - SHIPPED_FILE_LIMIT))
            data = handle.read()
        files[path.relative_to(root).as_posix()] = data
    return files
