"""`codeagent eval grade|run`: SWE-bench-style grading and batch agent runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click


def _executor_options(command):
    command = click.option("--prebuild", is_flag=True, help="Build every instance image the batch needs first "
                                                            "(with --executor ray: on every node).")(command)
    command = click.option("--ray-address", help="The Ray cluster (host:port, ray://..., auto); default: a new "
                                                 "one-node Ray here.")(command)
    return click.option("--executor", "executor_kind", type=click.Choice(["local", "ray"]), default="local",
                        show_default=True, help="local: --workers processes here; ray: one Ray task per instance "
                                                "on a cluster's nodes.")(command)


def _image_options(command):
    options = [
        click.option("--images", "image_source", type=click.Choice(["build", "official"]),
                     help="build: build each environment here (air-gapped; the default); official: pull the "
                          "official SWE-bench harness's prebuilt images (config: images.source)."),
        click.option("--namespace", help="Namespace of the official images (default swebench; config: "
                                         "images.namespace)."),
        click.option("--registry", help="A registry mirror every prebuilt image is pulled through, "
                                        "host[:port][/path] (config: images.registry)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _selection_options(command):
    options = [
        click.option("--dataset", required=True, help="lite, lite-dev, verified, full, hf:ID[:SPLIT], or a file."),
        click.option("--instances", help="Comma-separated instance ids."),
        click.option("--regex", help="Regular expression on instance ids."),
        click.option("--repo", "repo_filter", help="Only this repository, e.g. psf/requests."),
        click.option("--slice", "slice_", help="A slice of the selection, e.g. 0:10."),
        click.option("--repos", type=click.Path(file_okay=False), help="Local mirrors: DIR/owner/name git repositories."),
        click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
                     help="Instances in parallel."),
        click.option("--output", type=click.Path(file_okay=False), help="Output directory (default ./codeagent-eval/NAME)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


class _LazyGroup(click.Group):
    """`select` is imported only when used, so `codeagent --help` does not load what it needs."""

    def list_commands(self, ctx):
        return sorted([*super().list_commands(ctx), "select"])

    def get_command(self, ctx, name):
        if name == "select":
            from .select import select_command

            return select_command
        return super().get_command(ctx, name)


@click.group("eval", cls=_LazyGroup)
def eval_group() -> None:
    """Grade predictions (an offline SWE-bench harness), run the agent on benchmarks, and compare
    selection policies offline."""


@eval_group.command("grade")
@_selection_options
@click.option("--predictions", type=click.Path(exists=True, dir_okay=False), help="SWE-bench predictions (.json/.jsonl).")
@click.option("--gold", is_flag=True, help="Grade the gold patches (gold must resolve).")
@click.option("--empty", is_flag=True, help="Grade the empty patch (nothing may resolve).")
@_image_options
@_executor_options
def grade(dataset, instances, regex, repo_filter, slice_, repos, workers, output, predictions, gold, empty,
          image_source, namespace, registry, executor_kind, ray_address, prebuild) -> None:
    """Grade patches: each instance's report lands in OUTPUT/instances/ID/report.json."""
    from ..config import ConfigError, flag_overrides, load_config
    from .batch import changed_predictions, grade_batch
    from .ray_executor import RayUnavailable
    from .runner import BatchDir

    if sum(map(bool, (predictions, gold, empty))) != 1:
        raise click.UsageError("give exactly one of --predictions, --gold or --empty")
    with _errors(RayUnavailable, ConfigError):
        images = load_config(None, None, flag_overrides([], images__source=image_source, images__namespace=namespace,
                                                        images__registry=registry)).images
        found = read_predictions(Path(predictions)) if predictions else None
        if found is not None:
            _check_known(found, dataset)
        # Only the predicted instances need a mirror under --repos, not the whole dataset.
        tasks = _tasks(dataset, instances, regex, repo_filter, slice_, repos, only=found, images=images)
        if found is not None:
            patches, name = {i: p["model_patch"] or "" for i, p in found.items()}, _model_name(found)
        else:
            patches = {task.instance_id: (task.gold_patch or "") if gold else "" for task in tasks}
            name = "gold" if gold else "empty"
        if not tasks:
            raise click.UsageError("no instance selected (check --instances/--regex/--repo and the predictions)")
        out = Path(output or f"codeagent-eval/{_slug(dataset)}-{name}")
        changed = changed_predictions(BatchDir(out), {task.instance_id: patches.get(task.instance_id, "")
                                                      for task in tasks})
        if changed:
            click.echo(f"{len(changed)} prediction(s) differ from the ones graded before in {out}; grading them "
                       f"again (old files kept as *.previous.json): {_ids(changed)}", err=True)
        executor = _prebuilt(tasks, _executor(workers, executor_kind, ray_address), prebuild)
        reports = _with_progress(len(tasks), lambda progress: grade_batch(
            tasks, patches, out, model_name=name, executor=executor, progress=progress), out)
    defects = _environment_defects(reports, gold=gold, empty=empty)
    _finish(reports, out, {"dataset": dataset, "model": name, **({"environment_defects": defects} if defects else {})},
            defects=defects)


@eval_group.command("run")
@_selection_options
@click.option("--model", "model_name", help="litellm model id, or replay:TRAJECTORY.")
@click.option("--api-base", help="Base URL of an OpenAI-compatible server.")
@click.option("--config", "config_file", help="A config file (YAML).")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE", help="Override a setting.")
@click.option("--candidates", type=int, help="N candidates per task; reports Pass@1, Pass@N and Best@N per policy.")
@_image_options
@_executor_options
def run(dataset, instances, regex, repo_filter, slice_, repos, workers, output, model_name, api_base, config_file,
        settings, candidates, image_source, namespace, registry, executor_kind, ray_address, prebuild) -> None:
    """Run the agent on each task in its own sandbox, then grade its patch. Resumable."""
    from ..config import ConfigError, flag_overrides, load_config
    from ..models import ModelConfigError
    from .batch import run_batch
    from .ray_executor import RayUnavailable

    with _errors(ConfigError, ModelConfigError, RayUnavailable):
        overrides = flag_overrides(list(settings), model__name=model_name, model__api_base=api_base,
                                   scaling__candidates=candidates, images__source=image_source,
                                   images__namespace=namespace, images__registry=registry)
        config = load_config(None, config_file, overrides)
        if not config.model.name:
            raise ModelConfigError("no model configured: pass --model (or set model.name in a config file)")
        tasks = _tasks(dataset, instances, regex, repo_filter, slice_, repos, images=config.images)
        out = Path(output or f"codeagent-eval/{_slug(dataset)}-{_slug(config.model.name)}")
        executor = _prebuilt(tasks, _executor(workers, executor_kind, ray_address), prebuild)
        reports = _with_progress(len(tasks), lambda progress: run_batch(
            tasks, config.model_dump(mode="json"), out, executor=executor, progress=progress), out)
    costs = [r.get("cost") or 0.0 for r in reports]
    statuses: dict[str, int] = {}
    for report in reports:
        statuses[str(report.get("exit_status"))] = statuses.get(str(report.get("exit_status")), 0) + 1
    _finish(reports, out, {"dataset": dataset, "model": config.model.name, "cost": round(sum(costs), 4),
                           "exit_statuses": statuses})


def read_predictions(path: Path) -> dict[str, dict]:
    """SWE-bench predictions (.jsonl: one per line; else a JSON list or {id: prediction}). Every
    problem is a one-line error naming the line: bad UTF-8, bad JSON, missing fields, duplicate ids.
    A patch's non-UTF-8 bytes are \\udcXX escapes (codeagent.patches), never raw bytes."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise click.ClickException(f"{path}:{line}: not UTF-8 (byte {error.start}); predictions must be "
                                   "UTF-8 JSON, with patch bytes that are not UTF-8 written as \\udcXX escapes") from None
    if path.suffix == ".jsonl":
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                rows.append((number, _json(line, path, number)))
    else:
        loaded = _json(text, path, None)
        listed = list(loaded.values()) if isinstance(loaded, dict) else loaded
        if not isinstance(listed, list):
            raise click.ClickException(f"{path}: expected a JSON list of predictions or an object of them")
        rows = list(enumerate(listed, start=1))
    found: dict[str, dict] = {}
    duplicates: list[str] = []
    where = "line" if path.suffix == ".jsonl" else "prediction"
    for number, row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str) or "model_patch" not in row:
            raise click.ClickException(f"{path}: {where} {number} needs instance_id (a string) and model_patch")
        if not isinstance(row["model_patch"], (str, type(None))):
            raise click.ClickException(f"{path}: {where} {number}: model_patch must be a string or null")
        if row["instance_id"] in found and row["instance_id"] not in duplicates:
            duplicates.append(row["instance_id"])
        found[row["instance_id"]] = row
    if duplicates:
        raise click.ClickException(f"{path}: more than one prediction for {_ids(duplicates)}; keep one each")
    return found


class _RepeatedKeys(ValueError):
    pass


def _unique_keys(pairs: list) -> dict:
    seen: set[str] = set()
    repeated: list[str] = []
    for key, _ in pairs:
        if key in seen and key not in repeated:
            repeated.append(key)
        seen.add(key)
    if repeated:  # json.loads would silently keep the last one
        raise _RepeatedKeys(", ".join(repeated))
    return dict(pairs)


def _json(text: str, path: Path, line: int | None):
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _RepeatedKeys as error:
        where = f"{path}:{line}" if line is not None else str(path)
        raise click.ClickException(f"{where}: a JSON object gives more than one value for {error}") from None
    except ValueError as error:
        at = line if line is not None else getattr(error, "lineno", "?")
        raise click.ClickException(f"{path}:{at}: not valid JSON ({getattr(error, 'msg', error)})") from None


def _check_known(found: dict[str, dict], dataset: str) -> None:
    from .datasets import load_rows

    other = _task_file(dataset)
    known = {task.instance_id for task in other} if other is not None else \
        {row.get("instance_id") for row in load_rows(dataset)}
    unknown = [instance_id for instance_id in found if instance_id not in known]
    if unknown:
        raise click.ClickException(f"{len(unknown)} prediction(s) for instances that are not in {dataset}: "
                                   f"{_ids(unknown)}")


def _ids(ids: list[str], shown: int = 10) -> str:
    return ", ".join(ids[:shown]) + (f" ... ({len(ids) - shown} more)" if len(ids) > shown else "")


def _model_name(found: dict[str, dict]) -> str:
    names = {row.get("model_name_or_path") or "model" for row in found.values()}
    return sorted(names)[0] if len(names) == 1 else "mixed"


def _environment_defects(reports: list[dict], *, gold: bool, empty: bool) -> dict[str, str]:
    """{instance: why} for the instances that break the check a --gold or --empty run makes:
    gold must resolve, the empty patch must not. Either failure is the environment's, not a verdict."""
    defects = {}
    for report in reports:
        outcome = report.get("outcome", "?")
        reason = (report.get("reason") or "").strip().splitlines()
        detail = f"{outcome}" + (f": {reason[0]}" if reason else "")
        if report.get("repository_unavailable"):  # not judged: an error (its reason says --repos), no defect
            continue
        if gold and not report.get("resolved"):
            defects[report["instance_id"]] = f"gold does not resolve ({detail})"
        elif empty and report.get("resolved"):
            defects[report["instance_id"]] = "the empty patch resolves (the tests do not test the fix)"
    return defects


def _task_file(dataset: str):
    """The tasks of a file in SWE-smith's or R2E-Gym's format (codeagent.data.formats), else None
    (a SWE-bench file or a dataset name: datasets.py reads it)."""
    from ..data.formats import TaskFormatError, detect_format, load_tasks, read_rows
    from .datasets import DatasetError

    path = Path(dataset).expanduser()
    if not path.is_file() or path.suffix not in (".json", ".jsonl", ".parquet"):
        return None
    try:
        rows = read_rows(path)
        if not rows or detect_format(rows[0]) == "swebench":
            return None
        return load_tasks(path)
    except TaskFormatError as error:
        raise DatasetError(str(error)) from None


def _tasks(dataset, instances, regex, repo_filter, slice_, repos, only=None, images=None):
    import re

    from ..harness.prebuilt import mark
    from .datasets import DatasetError, load_tasks, parse_slice, repo_under
    from .runner import check_distinct_folders

    tasks = _task_file(dataset)
    if tasks is None:
        tasks = load_tasks(dataset, instance_ids=instances.split(",") if instances else None, regex=regex,
                           repo=repo_filter, slice=slice_)
    else:  # the same selection, on Tasks
        wanted = set(instances.split(",")) if instances else None
        tasks = [task for task in tasks if (wanted is None or task.instance_id in wanted)
                 and (not regex or re.search(regex, task.instance_id))
                 and (not repo_filter or repo_filter in (task.extra.get("swebench_repo"), task.repo))]
        tasks = tasks[parse_slice(slice_)] if slice_ else tasks
        if not tasks:
            raise DatasetError("the selection matched no instance")
    if only is not None:
        tasks = [task for task in tasks if task.instance_id in only]
    tasks = mark(tasks, images.source if images else "build", images.namespace if images else None,
                 images.registry if images else None)
    try:
        check_distinct_folders(task.instance_id for task in tasks)
    except ValueError as error:
        raise DatasetError(str(error)) from None
    if repos:
        located = []
        for task in tasks:
            if task.extra.get("images"):  # its repository is in its image
                located.append(task)
                continue
            name = task.extra.get("swebench_repo") or ""
            path = repo_under(repos, name, task.instance_id)
            if not path.exists():
                raise click.ClickException(f"{task.instance_id}: no repository {name} under {repos} "
                                           f"(expected {path}, a git repository or mirror)")
            located.append(task.model_copy(update={"repo": str(path)}))
        tasks = located
    return tasks


def _executor(workers: int, kind: str = "local", ray_address: str | None = None):
    if kind == "ray":
        from .ray_executor import RayExecutor

        return RayExecutor(ray_address)
    from .executors import LocalExecutor

    return LocalExecutor(workers)


def _prebuilt(tasks, executor, wanted: bool):
    """The executor, after --prebuild has built the batch's images (failures are told, not fatal:
    those instances fail when graded, as they would have)."""
    if not wanted:
        return executor
    from .prebuild import prebuild

    results = prebuild(tasks, executor)
    built = sum(len(result.get("built", [])) for result in results)
    failed = sorted({i for result in results for i in result.get("errors", {})})
    lost = [result["node"] for result in results if result.get("error")]
    click.echo(f"prebuild: {len(tasks)} task(s) on {len(results)} node(s), {built} layer(s) built"
               + (f"; images failed for {_ids(failed)}" if failed else "")
               + (f"; it failed on {len(lost)} node(s)" if lost else ""), err=True)
    return executor


def _with_progress(total: int, work, out: Path):
    """Run `work(advance)` under a progress bar, with a line per running instance saying what it does
    (cloning, building the environment, running the agent, testing: evals/phases.py) and for how
    long. Not on a terminal, each phase change is printed as a line instead."""
    import threading

    from rich.markup import escape

    # the status names the last instance: the dataset's text, shown and never read as markup or escapes
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TaskID,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    from ..visible import visible
    from .phases import phases_of, running
    from .runner import BatchDir, is_error

    class BarOnly(ProgressColumn):
        """A column of the batch's bar, left empty on an instance's row."""

        def __init__(self, column: ProgressColumn):
            super().__init__()
            self.column = column

        def render(self, task):
            return Text("") if task.fields.get("instance") else self.column.render(task)

    counts = {"resolved": 0, "errors": 0}
    console = _console()
    with Progress(TextColumn("[bold]{task.description}"), BarOnly(BarColumn()), BarOnly(MofNCompleteColumn()),
                  BarOnly(TimeElapsedColumn()), TextColumn("{task.fields[status]}", markup=False), transient=False,
                  console=console) as progress:
        bar = progress.add_task("instances", total=total, status="")
        rows: dict[str, TaskID] = {}  # instance -> its progress row
        printed: dict[str, int] = {}  # instance -> how many of its phases were printed (not on a terminal)
        lock = threading.Lock()  # the watcher thread and the results both update the rows
        done = threading.Event()

        def show_phases(finished: str | None = None) -> None:
            with lock:
                now = {instance_id: (phases[-1], seconds)
                       for instance_id, (phases, seconds) in running(out / "instances").items()}
                if not console.is_terminal:
                    for instance_id in now:
                        _print_new(instance_id, phases_of(out / "instances" / instance_id))
                    if finished:  # the phases it went through since the last look
                        _print_new(finished, phases_of(BatchDir(out).instance(finished).root))
                for instance_id, (phase, seconds) in now.items():
                    if instance_id not in rows:
                        rows[instance_id] = progress.add_task(f"  {escape(visible(instance_id))}", total=None, status="", start=False,
                                                              instance=True)
                    progress.update(rows[instance_id], status=f"{phase} · {_minutes(seconds)}")
                for instance_id in [i for i in rows if i not in now]:
                    progress.remove_task(rows.pop(instance_id))

        def _print_new(instance_id: str, phases: list[str]) -> None:
            for phase in phases[printed.get(instance_id, 0):]:
                console.print(visible(f"[{instance_id}] {phase}"), markup=False, highlight=False)
            printed[instance_id] = max(printed.get(instance_id, 0), len(phases))

        def watch() -> None:
            while not done.wait(0.5):
                show_phases()

        def advance(report: dict) -> None:
            counts["resolved"] += bool(report.get("resolved"))
            counts["errors"] += is_error(report)
            show_phases(finished=report.get("instance_id"))
            progress.update(bar, advance=1, status=visible(f"resolved {counts['resolved']} · errors "
                                                   f"{counts['errors']} · last {report.get('instance_id')}"))

        watcher = threading.Thread(target=watch, name="eval-phases", daemon=True)
        watcher.start()
        try:
            return work(advance)
        finally:
            done.set()
            watcher.join()
            with lock:
                for row in rows.values():
                    progress.remove_task(row)


def _minutes(seconds: float) -> str:
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


def _finish(reports: list[dict], out: Path, extra: dict, defects: dict[str, str] | None = None) -> None:
    """Summary, table; exit status 1 when any instance errored (it is counted, never dropped) or
    when a --gold/--empty check found environment defects (`defects`)."""
    from rich.table import Table

    from ..visible import visible
    from .batch import summarize
    from .runner import write_json_atomic

    summary = summarize(reports, extra)
    write_json_atomic(out / "summary.json", summary)
    table = Table(title=f"{summary['resolved']}/{summary['instances']} resolved ({summary['resolved_percent']}%)")
    for column in ("repository", "resolved", "errors", "total"):
        table.add_column(column)
    for repo, row in summary["per_repo"].items():
        table.add_row(repo, str(row["resolved"]), str(row["errors"]), str(row["total"]))
    _console().print(table)
    _console().print(_tally(summary), markup=False, highlight=False)
    if summary.get("touches_test_infrastructure"):
        _console().print(visible(f"patches touching test infrastructure (scored 0 as rewards): "
                                 f"{', '.join(summary['touches_test_infrastructure'])}"), markup=False, highlight=False)
    if summary.get("tamper_evidence"):
        _console().print(visible(f"test logs that do not match the run codeagent's pytest guard saw (unresolved, "
                                 f"scored 0): {', '.join(summary['tamper_evidence'])}"), markup=False, highlight=False)
    if "scaling" in summary:
        scaling = summary["scaling"]
        _console().print(f"Pass@1 {scaling['pass_at_1']:.2%} · Pass@N {scaling['pass_at_n']}/{summary['instances']} · "
                         "Best@N " + ", ".join(f"{p} {n}" for p, n in scaling["best_at_n"].items()))
    _console().print(f"reports: {out}/instances/*/report.json · summary: {out}/summary.json")
    if summary["errors"]:
        failed = {r["instance_id"]: r.get("reason", "") for r in reports if r["instance_id"] in summary["error_instances"]}
        for instance_id, reason in list(failed.items())[:10]:  # the reason may quote the model's patch
            line = visible(f"error: {instance_id}: {reason.splitlines()[0] if reason else '?'}")
            _console().print(line, markup=False, highlight=False, soft_wrap=True)
        _console().print(f"{summary['errors']} of {summary['instances']} instance(s) errored (run the same "
                         "command again to retry them)")
    for instance_id, why in (defects or {}).items():
        _console().print(visible(f"environment defect: {instance_id}: {why}"), markup=False, highlight=False)
    if defects:
        _console().print(f"{len(defects)} of {summary['instances']} instance(s) show an environment defect: "
                         "their verdicts cannot be trusted until the environment is fixed", markup=False)
    if summary["errors"] or defects:
        sys.exit(1)


def _tally(summary: dict) -> str:
    """`resolved 1 · unresolved 2 · errors 0`, then how the unresolved and errored ones ended."""
    unresolved = summary["instances"] - summary["resolved"] - summary["errors"]
    line = f"resolved {summary['resolved']} · unresolved {unresolved} · errors {summary['errors']}"
    others = {outcome: count for outcome, count in summary["outcomes"].items() if outcome not in ("resolved", "unresolved")}
    if others:
        line += " (" + ", ".join(f"{outcome.replace('_', ' ')} {count}" for outcome, count in sorted(others.items())) + ")"
    return line


def _console():
    from rich.console import Console

    return Console(stderr=True)


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(text).name if "/" in text and Path(text).exists() else text)


class _errors:
    def __init__(self, *extra):
        self.extra = extra

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        from ..sandbox.errors import SandboxError
        from .datasets import DatasetError

        if exc_type is not None and issubclass(exc_type, (DatasetError, SandboxError, FileNotFoundError, *self.extra)):
            click.echo(f"error: {exc}", err=True)
            sys.exit(3)
        return False
