#!/usr/bin/env bash
# Set everything up, then run the test suite (extra arguments go to pytest): in .venv, which holds the
# versions of requirements/lock.txt, or with CODEAGENT_UNLOCKED=1 in .venv-latest, made afresh with the
# newest versions pyproject.toml allows (to find drift on purpose; the lock is left alone).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
venv=.venv
case ${CODEAGENT_UNLOCKED:-} in ""|0) ;; *) venv=.venv-latest;; esac
exec "$venv/bin/python" -m pytest -q "$@"
