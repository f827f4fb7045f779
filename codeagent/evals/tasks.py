"""The tasks of `eval grade|run`: the data set's selection (codeagent.data), marked for the images
they run in, refused if two would share an output folder, and pointed at --repos mirrors (a mined task
without --repos: at the repository it was mined from, its provenance.repository)."""

from __future__ import annotations

import click


def eval_tasks(dataset, instances, regex, repo_filter, slice_, repos, only=None, images=None):
    from ..data import DatasetError, load_tasks
    from ..data.ids import check_distinct_folders
    from ..data.provenance import at_provenance
    from ..data.swebench import repo_under
    from ..harness import mark
    from ..harness.env_images import pulled

    tasks = load_tasks(dataset, instance_ids=instances.split(",") if instances else None, regex=regex,
                       repo=repo_filter, slice=slice_)
    if only is not None:
        tasks = [task for task in tasks if task.instance_id in only]
    tasks = mark(tasks, images.source if images else "build", images.namespace if images else None,
                 images.registry if images else None)
    try:
        check_distinct_folders(task.instance_id for task in tasks)
    except ValueError as error:
        raise DatasetError(str(error)) from None
    located = []
    for task in tasks:
        if pulled(task):  # its repository is in its image
            located.append(task)
        elif repos:
            name = task.swebench_repo or ""
            path = repo_under(repos, name, task.instance_id)
            if not path.exists():
                raise click.ClickException(f"{task.instance_id}: no repository {name} under {repos} "
                                           f"(expected {path}, a git repository or mirror)")
            located.append(task.model_copy(update={"repo": str(path)}))
        else:
            located.append(at_provenance(task))
    return located

