"""The evaluation harness: a task's environment (images built from specs, or prebuilt ones pulled) and
grading a patch in it, with SWE-bench's rule and codeagent's integrity checks.

Images and their specs:
    specs.py spec_files.py spec_model.py   environment specs (evals/environments/swebench/), read and resolved
    spec_overrides.py spec_requirements.py spec_stand_in.py   a task's own install config, requirement
                       files, a stand-in repository for building without the real sources
    environment.py     a task's images: base -> env -> instance, tags from spec hashes
    layers.py          one image layer: a script run in a container and committed
    prebuilt.py        tasks whose images are pulled from a registry (three layouts)
    services.py        sidecar services a task's tests expect on the network, offline

Running and grading:
    task_env.py        one task's container: apply a patch, put the tests back, run them, read the log
    evaluate.py        grade one patch on one task (built images); prebuilt_eval.py: in a prebuilt image
    directives.py      which tests to run, and the full test command
    log_parsers.py     a test log -> {test id: status}
    grading.py         statuses + FAIL_TO_PASS/PASS_TO_PASS + exit status -> GradeReport (the verdict)
    integrity.py       does a patch touch the test infrastructure its grading relies on
    guard.py           a tamper-evident pytest run; pytest_guard_plugin.py is the plugin it copies into
                       the container (never imported here: standard library, Python 3.5 syntax)
    offline.py         which failing tests tried to reach the network

Nothing is re-exported here: callers import the module they need.
"""
