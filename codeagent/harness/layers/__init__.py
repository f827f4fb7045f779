"""Image layers: one layer (layer.py, carry.py, tree_sync.py), SWE-bench's Python images (python_env.py),
devcontainers, the sidecar services tests reach."""
