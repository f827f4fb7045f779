#!/usr/bin/env bash
# The main job on the bundled example: set everything up, then start a sandbox on the example
# repository (evals/examples/cart) and run its tests there. Two tests fail: that is the bug.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
set +e
.venv/bin/codeagent sandbox run --example cart
status=$?
set -e
if [ "$status" -eq 1 ]; then
  echo "[example] the example's tests ran in the sandbox; the failures above are the bug to fix" >&2
  exit 0
fi
exit "$status"
