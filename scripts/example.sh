#!/usr/bin/env bash
# The main job on the bundled example: set everything up, then let codeagent resolve the issue of
# evals/examples/cart in a Docker sandbox. With a model configured (--model, or model.name in
# ~/.config/codeagent/config.yaml) it solves it for real; with none, it replays a recorded
# trajectory and says so. Extra arguments go to `codeagent solve`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/codeagent solve --example cart --headless "$@"
