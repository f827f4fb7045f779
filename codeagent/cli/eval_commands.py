"""`codeagent eval grade|run`: SWE-bench-style grading and batch agent runs."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..run.scaling_flags import scaling_options, scaling_overrides
from ..scaling.selection import POLICIES


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


@click.group("eval")
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
    from ..evals.batch import changed_predictions, grade_batch
    from ..evals.predictions import check_known, ids_text, model_name, read_predictions
    from ..evals.progress import with_progress
    from ..evals.report import environment_defects, finish
    from ..evals.runner import BatchDir
    from ..evals.tasks import eval_tasks
    from ..executors.ray_executor import RayUnavailable

    if sum(map(bool, (predictions, gold, empty))) != 1:
        raise click.UsageError("give exactly one of --predictions, --gold or --empty")
    with _errors(RayUnavailable, ConfigError):
        images = load_config(None, None, flag_overrides([], images__source=image_source, images__namespace=namespace,
                                                        images__registry=registry)).images
        found = read_predictions(Path(predictions)) if predictions else None
        if found is not None:
            check_known(found, dataset)
        # Only the predicted instances need a mirror under --repos, not the whole dataset.
        tasks = eval_tasks(dataset, instances, regex, repo_filter, slice_, repos, only=found, images=images)
        if found is not None:
            patches, name = {i: p["model_patch"] or "" for i, p in found.items()}, model_name(found)
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
                       f"again (old files kept as *.previous.json): {ids_text(changed)}", err=True)
        executor = _prebuilt(tasks, _executor(workers, executor_kind, ray_address), prebuild)
        reports = with_progress(len(tasks), lambda progress: grade_batch(
            tasks, patches, out, model_name=name, executor=executor, progress=progress), out)
    defects = environment_defects(reports, gold=gold, empty=empty)
    finish(reports, out, {"dataset": dataset, "model": name, **({"environment_defects": defects} if defects else {})},
            defects=defects)


@eval_group.command("run")
@_selection_options
@click.option("--model", "model_name", help="litellm model id, or replay:TRAJECTORY.")
@click.option("--api-base", help="Base URL of an OpenAI-compatible server.")
@click.option("--config", "config_file", help="A config file (YAML).")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE", help="Override a setting.")
@click.option("--candidates", type=int, help="N candidates per task; reports Pass@1, Pass@N and Best@N per policy.")
@scaling_options
@_image_options
@_executor_options
def run(dataset, instances, regex, repo_filter, slice_, repos, workers, output, model_name, api_base, config_file,
        settings, candidates, image_source, namespace, registry, executor_kind, ray_address, prebuild, tts,
        select_policy, budget_tokens) -> None:
    """Run the agent on each task in its own sandbox, then grade its patch. Resumable."""
    from ..config import ConfigError, flag_overrides, load_config
    from ..evals.batch import run_batch
    from ..evals.progress import with_progress
    from ..evals.report import finish
    from ..evals.tasks import eval_tasks
    from ..executors.ray_executor import RayUnavailable
    from ..models import ModelConfigError

    with _errors(ConfigError, ModelConfigError, RayUnavailable):
        overrides = flag_overrides(list(settings), model__name=model_name, model__api_base=api_base,
                                   scaling__candidates=candidates, images__source=image_source,
                                   images__namespace=namespace, images__registry=registry,
                                   **scaling_overrides(tts, select_policy, budget_tokens))
        config = load_config(None, config_file, overrides)
        if not config.model.name:
            raise ModelConfigError("no model configured: pass --model (or set model.name in a config file)")
        tasks = eval_tasks(dataset, instances, regex, repo_filter, slice_, repos, images=config.images)
        out = Path(output or f"codeagent-eval/{_slug(dataset)}-{_slug(config.model.name)}")
        executor = _prebuilt(tasks, _executor(workers, executor_kind, ray_address), prebuild)
        reports = with_progress(len(tasks), lambda progress: run_batch(
            tasks, config.model_dump(mode="json"), out, executor=executor, progress=progress), out)
    costs = [r.get("cost") or 0.0 for r in reports]
    statuses: dict[str, int] = {}
    for report in reports:
        statuses[str(report.get("exit_status"))] = statuses.get(str(report.get("exit_status")), 0) + 1
    finish(reports, out, {"dataset": dataset, "model": config.model.name, "cost": round(sum(costs), 4),
                           "exit_statuses": statuses})


def _executor(workers: int, kind: str = "local", ray_address: str | None = None):
    if kind == "ray":
        from ..executors.ray_executor import RayExecutor

        return RayExecutor(ray_address)
    from ..executors.local import LocalExecutor

    return LocalExecutor(workers)


def _prebuilt(tasks, executor, wanted: bool):
    """The executor, after --prebuild has built the batch's images (failures are told, not fatal:
    those instances fail when graded, as they would have)."""
    if not wanted:
        return executor
    from ..evals.prebuild import prebuild
    from ..evals.predictions import ids_text

    results = prebuild(tasks, executor)
    built = sum(len(result.get("built", [])) for result in results)
    failed = sorted({i for result in results for i in result.get("errors", {})})
    lost = [result["node"] for result in results if result.get("error")]
    click.echo(f"prebuild: {len(tasks)} task(s) on {len(results)} node(s), {built} layer(s) built"
               + (f"; images failed for {ids_text(failed)}" if failed else "")
               + (f"; it failed on {len(lost)} node(s)" if lost else ""), err=True)
    return executor


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(text).name if "/" in text and Path(text).exists() else text)


class _errors:
    def __init__(self, *extra):
        self.extra = extra

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        from ..data.errors import DatasetError
        from ..sandbox.errors import SandboxError

        if exc_type is not None and issubclass(exc_type, (DatasetError, SandboxError, FileNotFoundError, *self.extra)):
            click.echo(f"error: {exc}", err=True)
            sys.exit(3)
        return False


@eval_group.command("select")
@click.option("--candidates", "candidates_file", required=True, type=click.Path(exists=True, dir_okay=False),
              help="JSONL: one Candidate per line, with `resolved` known.")
@click.option("--policy", "policies", multiple=True, type=click.Choice(POLICIES),
              help="A policy to measure (repeatable; default: all).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random policy.")
@click.option("--top-k", type=int, default=3, show_default=True, help="The judge's shortlist in hybrid.")
@click.option("--dataset", help="The instances' dataset: their issues (what a tournament's judge reads); with "
              "--repos, patches are also normalized against each instance's base tree.")
@click.option("--judge-model", help="The tournament's pairwise judge (a model spec: hf:PATH, a litellm id...); "
              "without it the tournament is the hybrid order.")
@click.option("--repos", type=click.Path(file_okay=False), help="Local mirrors: DIR/owner/name git repositories.")
@click.option("--per-instance", is_flag=True, help="Also print a row per instance.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write the numbers as JSON here.")
def select_command(candidates_file, policies, seed, top_k, dataset, judge_model, repos, per_instance,
                   json_out) -> None:
    """Re-run selection over stored candidates with known outcomes: Best@N per policy vs Pass@N."""
    from ..evals.select import SelectError, select_report

    if repos and not dataset:
        raise click.UsageError("--dataset and --repos go together")
    try:
        select_report(candidates_file, policies, seed=seed, top_k=top_k, dataset=dataset, judge_model=judge_model,
                      repos=repos, per_instance=per_instance, json_out=json_out)
    except SelectError as exc:
        raise click.ClickException(str(exc)) from None
