"""Batch evaluation: `codeagent eval grade|run|select` over many tasks (a peer of train/: neither imports
the other; both take tasks from data/ and run work through executors/ and harness/).

    tasks.py        a batch's tasks: the data set's selection, marked for their images, pointed at --repos
    predictions.py  the predictions `eval grade --predictions` reads, checked line by line
    prebuild.py     `--prebuild`: every instance image built before any instance starts
    batch.py        grading and agent runs over many tasks, resumable
    runner.py       per-instance state on disk: resumable, one failure isolated
    phases.py       what each running instance is doing, for the progress display
    progress.py     the progress bar and a line per running instance
    report.py       what a batch prints and writes when it ends (summary.json, the table, the exit status)
    select.py       `eval select`: selection re-run over stored candidates with known outcomes

The click group `codeagent eval` is cli/eval_commands.py."""
