"""`codeagent tasks mine`: SWE-bench-format tasks from a repository's history (codeagent/mine/)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from . import _user_errors, cli


@cli.group("tasks")
def tasks_group() -> None:
    """Make tasks: from a repository's history (`mine`)."""


@tasks_group.command("mine")
@click.argument("repo")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The tasks file (SWE-bench JSONL); beside it FILE.state.jsonl (the resumable record) and "
                   "STEM.rejects.jsonl (every skipped commit and why) and STEM.logs/ (each candidate's build and test logs).")
@click.option("--name", help="The repository's owner/name (default: from its URL, its origin remote or a "
                             "mirror folder named owner+name).")
@click.option("--since", help="Only commits made since this date (git's --since).")
@click.option("--until", help="Only commits made until this date (git's --until).")
@click.option("--max-commits", type=click.IntRange(min=1), help="Walk at most this many first-parent commits.")
@click.option("--ref", default="HEAD", show_default=True, help="The branch or commit whose history is walked.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Candidates validated at once (threads; each runs its own containers).")
@click.option("--executor", "executor_kind", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="local: --workers threads here; ray: one Ray task per candidate on a cluster's nodes "
                   "(each node's own Docker engine; the logs come back here).")
@click.option("--ray-address", help="The Ray cluster (host:port, ray://..., auto); default: a new one-node Ray here.")
@click.option("--reruns", type=click.IntRange(min=1), default=3, show_default=True,
              help="Runs of each side (base, gold); a test whose result changes between them is dropped.")
@click.option("--after", help="Decontamination: only commits made after this date.")
@click.option("--exclude", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A benchmark's instances to leave out: its rows (.json/.jsonl) or instance ids, one a line.")
@click.option("--split-date", help="Held-out split: rows made on or after this date get split=test (the others "
                                   "train), also written to STEM.train.jsonl and STEM.test.jsonl.")
@click.option("--max-files", type=click.IntRange(min=1), default=50, show_default=True,
              help="Skip commits that change more files.")
@click.option("--max-patch-bytes", type=click.IntRange(min=1), default=1 << 20, show_default=True,
              help="Skip commits whose diff is larger.")
@click.option("--setup-model", help="A model for the set-up agent: a candidate whose environment lets no test run is "
                                    "explored and repaired by it, then validated again (its finding is stored in the row).")
@click.option("--issues", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A JSON object of issue (or pull request) number -> text, added to the statement of the units that "
                   "reference them (#N, Fixes #N, a branch named after N).")
@click.option("--statement-model", help="A model that writes each kept task's statement from its tests and their "
                                        "failures (never the fix); without one, the history's text is the statement. "
                                        "Either way a statement must state what the tests check.")
def mine_command(repo, output, name, since, until, max_commits, ref, workers, executor_kind, ray_address, reruns, after,
                 exclude, split_date, max_files, max_patch_bytes, setup_model, issues, statement_model) -> None:
    """Mine validated tasks from REPO's history (a local path, a mirror or a URL): first-parent commits that
    change code and tests, each run on its base and with its fix through the eval harness (Docker)."""
    from ..executors.ray_executor import RayUnavailable
    from ..mine.candidates import Limits
    from ..mine.mining import Options, mine, open_repository, rejects_path
    from ..mine.progress import MiningProgress
    from ..models.errors import ModelConfigError

    with _user_errors(ValueError, RayUnavailable, ModelConfigError):
        repository = open_repository(repo, name)
        texts = {str(key): str(value) for key, value in json.loads(issues.read_text()).items()} if issues else {}
        options = Options(since=since, until=until, max_commits=max_commits, after=after, exclude=exclude,
                          split_date=split_date, workers=workers, reruns=reruns, ref=ref, issues=texts,
                          limits=Limits(max_patch_bytes=max_patch_bytes, max_files=max_files),
                          executor=executor_kind, ray_address=ray_address)
        if setup_model:
            from ..mine.setup_agent import setup_config
            from ..models import make_model

            options.setup = (make_model(setup_model), setup_config())
        if statement_model:
            from ..models import make_model

            options.statement_model = make_model(statement_model)
        with MiningProgress() as progress:
            summary = mine(repository, output, options, progress)
    reasons = ", ".join(f"{reason}: {count}" for reason, count in summary.skipped.most_common())
    click.echo(f"{repository.name}: {summary.commits} commits, {summary.candidates} candidates validated, "
               f"{summary.kept} kept, {summary.errors} broke, {summary.interrupted} interrupted ({summary.resumed} commits done "
               f"before), {summary.written} tasks in {output} "
               f"({summary.seconds:.0f}s); skipped: {reasons or 'none'}; reasons per commit in {rejects_path(output)}")


@tasks_group.command("demos")
@click.argument("tasks_file", metavar="TASKS", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--store", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="The trajectory store the demonstrations go to (SFT's data.store).")
@click.option("--recipe", "-c", "recipe_name", default="grpo-mined-tiny", show_default=True,
              help="The GRPO recipe whose rollout agent config (tools, prompts, limits) the demonstrations use.")
@click.option("--repos", type=click.Path(file_okay=False), help="DIR/owner/name mirrors (default: each row's provenance).")
def demos_command(tasks_file, store, recipe_name, repos) -> None:
    """Scripted demonstrations of mined TASKS for SFT, run and graded in each task's environment: the gold
    patch applied (resolves) and a look that changes nothing (does not), so that a small model learns the
    tool-call format and GRPO then has a choice to reward (train/sft-mined-tiny.yaml, grpo-mined-tiny.yaml)."""
    from ..mine.demos import record_demonstrations
    from ..train import TrainError
    from ..train.data import rl_tasks
    from ..train.grpo.trainer import agent_config
    from ..train.recipe import load_recipe

    with _user_errors(ValueError, TrainError):
        recipe = load_recipe(recipe_name, [f"data.tasks={tasks_file}", *([f"data.repos={repos}"] if repos else [])])
        tasks = rl_tasks(recipe.data)
        records = record_demonstrations(tasks, store, agent_config(recipe))
    for record in records:
        click.echo(f"{record['instance_id']} {record['kind']}: {record['outcome']} ({record['trajectory_id']})")
    click.echo(f"{len(records)} demonstrations of {len(tasks)} tasks in {store}")
