"""`codeagent eval select`: re-run selection over stored candidates with known outcomes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import click

from ..scaling.offline import DEFAULT_POLICIES, evaluate, load_candidates, print_report
from ..scaling.selection import POLICIES


@click.command("select")
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
    try:
        groups = load_candidates(candidates_file)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    if not groups:
        raise click.ClickException(f"{candidates_file} holds no candidate")
    readers, issues, pair_judge = None, None, None
    if repos and not dataset:
        raise click.UsageError("--dataset and --repos go together")
    if dataset:
        tasks = _tasks(dataset, list(groups))
        issues = {task.instance_id: task.problem_statement for task in tasks}
        readers = _readers(tasks, repos) if repos else None
    if judge_model:
        pair_judge = _pair_judge(judge_model)
    result = evaluate(groups, policies or DEFAULT_POLICIES, seed=seed, readers=readers, top_k=top_k, issues=issues,
                      pair_judge=pair_judge)
    print_report(result, per_instance=per_instance)
    if json_out:
        Path(json_out).write_text(json.dumps(result, indent=2))


def _tasks(dataset: str, instance_ids: list[str]) -> list:
    from ..data import DatasetError, load_tasks

    try:
        return load_tasks(dataset, instance_ids=instance_ids)
    except DatasetError as exc:
        raise click.ClickException(str(exc)) from None


def _pair_judge(spec: str):
    from ..models import ModelConfigError, make_model
    from ..scaling.tournament import ModelPairJudge

    try:
        return ModelPairJudge(make_model(spec))
    except ModelConfigError as exc:
        raise click.ClickException(str(exc)) from None


def _readers(tasks: list, repos: str) -> dict[str, Callable]:
    from ..data import DatasetError
    from ..data.swebench import repo_under
    from ..patches.base import git_reader

    readers = {}
    for task in tasks:
        try:
            path = repo_under(repos, task.swebench_repo, task.instance_id)
        except DatasetError as exc:
            raise click.ClickException(str(exc)) from None
        if not path.exists():
            raise click.ClickException(f"{task.instance_id}: no repository at {path}")
        readers[task.instance_id] = git_reader(_git_dir(path), task.base_commit or "HEAD")
    return readers


def _git_dir(path: Path) -> Path:
    import subprocess

    proc = subprocess.run(["git", "-C", str(path), "rev-parse", "--absolute-git-dir"], capture_output=True, text=True)
    return Path(proc.stdout.strip()) if proc.returncode == 0 else path
