"""Where work runs, for evals/ and train/ alike. Every executor offers `map_unordered(fn, items)`
(yield (item, result, error) as each item finishes; one error never stops the others), so the code
that grades or rolls out never knows where it runs.

    local.py         Executor (the protocol) and LocalExecutor: worker processes (or threads) here
    ray_executor.py  RayExecutor: one Ray task per item on a cluster's nodes, each holding a sandbox
                     slot of its node's Docker engine; `python -m codeagent.executors.ray_executor
                     resources` prints what a worker node advertises (optional extra: codeagent[ray])
    ray_sandbox.py   RaySandbox: a sandbox on a Ray worker node, driven from here call by call
    ray_watchdog.py  a local Ray and its sandboxes end with their driver, kill -9 included
    shipped.py       write_shipped_files: the files a result brought back from another node

Nothing is imported here: Ray loads only when a Ray executor is used.
"""
