#!/usr/bin/env bash
# The first thing to run when a GPU is lent: scripts/gpu_check.py (every GPU path one GPU can exercise, one table).
#   bash scripts/gpu_check.sh --fetch-wheels   here, where PyPI is reachable: the small wheels the GPU machine may
#                                              lack (bench/gpu_wheels.txt without torch and its CUDA packages) into
#                                              .whl/, refused over 60 MiB (a lent machine takes 64 MiB, and reaches
#                                              no registry; GPU_PYTHON=3.12 for another Python there)
#   bash scripts/gpu_check.sh OUT [--dry|--only STAGE...]   on the GPU machine: installs .whl/ if it travelled
#                                              (into a folder of its own, over the machine's torch), then the check
# vLLM and DeepSpeed are too large to carry: their stages run where they are installed (bash scripts/setup.sh
# --gpu builds the whole GPU set from requirements/gpu-lock.txt) and say "skipped" elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
if [ "${1:-}" = --fetch-wheels ]; then
  grep -v '^#' bench/gpu_wheels.txt | grep -vE '^(torch|triton|nvidia-)' | grep -v '^$' > .whl.list
  trap 'rm -f .whl.list' EXIT
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version "${GPU_PYTHON:-$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')}" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d .whl -r .whl.list
  size=$(du -sm .whl | cut -f1)
  echo "[gpu-check] .whl/: ${size} MiB" >&2
  [ "$size" -le 60 ] || { echo "[gpu-check] .whl/ is over 60 MiB: it would not travel" >&2; exit 1; }
  exit 0
fi
out=${1:?usage: bash scripts/gpu_check.sh OUT [--dry] | --fetch-wheels}
shift
site=${TMPDIR:-/tmp}/codeagent-gpu-check-site
if ls .whl/*.whl >/dev/null 2>&1; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$site" .whl/*.whl
  export PYTHONPATH="$site:$PWD"
else
  export PYTHONPATH="$PWD"
fi
PYTHONUNBUFFERED=1 exec "$py" scripts/gpu_check.py --out "$out" "$@"
