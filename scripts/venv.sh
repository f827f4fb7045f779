#!/usr/bin/env bash
# The Python part of the set-up: a virtualenv with codeagent and the given extras in it.
#   bash scripts/venv.sh DIR EXTRAS locked   the versions of requirements/lock.txt (scripts/setup.sh, CI)
#   bash scripts/venv.sh DIR EXTRAS latest   the newest versions pyproject.toml allows, in DIR made afresh
#                                            (CODEAGENT_UNLOCKED=1 bash scripts/test.sh, scripts/lock.sh)
#   bash scripts/venv.sh DIR EXTRAS gpu      the versions of requirements/gpu-lock.txt (scripts/setup.sh --gpu):
#                                            PyPI's CUDA torch, vLLM, DeepSpeed and the FlashAttention wheel
# A locked DIR is reinstalled only when pyproject.toml, the lock or EXTRAS changed (a stamp in DIR says).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 3 ] || { echo "usage: bash scripts/venv.sh DIR EXTRAS locked|latest" >&2; exit 2; }
dir=$1 extras=$2 mode=$3
lock=requirements/lock.txt
log() { printf '[setup] %s\n' "$*" >&2; }

[ "$mode" = gpu ] && lock=requirements/gpu-lock.txt
case $mode in
  locked|gpu)
    stamp=$(cat pyproject.toml "$lock" | sha256sum | cut -c1-16)-$extras
    [ "$(cat "$dir/.codeagent-installed" 2>/dev/null)" != "$stamp" ] || exit 0
    constraints="-c $lock";;
  latest)
    rm -rf "$dir"
    stamp=latest-$extras
    constraints="";;
  *) echo "venv.sh: mode is locked, latest or gpu, not $mode" >&2; exit 2;;
esac

if [ ! -x "$dir/bin/python" ]; then
  log "creating $dir"
  "${PYTHON:-python3}" -m venv "$dir"
fi
pip() { "$dir/bin/python" -m pip "$@"; }
log "installing codeagent[$extras] into $dir ($mode versions)"
rm -f "$dir/.codeagent-installed"  # a failed install below leaves no stamp, so the next run retries
if [ "$mode" != latest ]; then
  # the installers themselves too (torch needs setuptools at run time)
  installers=$(grep -E '^(pip|setuptools|wheel)==' "$lock" || true)
  [ -z "$installers" ] || pip install -q $installers
else
  pip install -q --upgrade pip
fi

case "$mode,$extras," in gpu,*) ;;  # the GPU set takes PyPI's CUDA torch, vLLM's pin, like the rest
  *,train,*)
  # CPU PyTorch first: a bare `pip install torch` pulls gigabytes of CUDA packages. Its dependencies
  # come with the install below (at the locked versions when locked); torch==V accepts V+cpu.
  want=""
  [ "$mode" = locked ] && want=$(sed -n 's/^torch==//p' "$lock")
  have=$("$dir/bin/python" -c "import importlib.metadata as m; print(m.version('torch').split('+')[0])" 2>/dev/null || true)
  if [ -z "$have" ] || { [ -n "$want" ] && [ "$have" != "$want" ]; }; then
    tag=$("$dir/bin/python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
    pattern="torch-${want:-*}+cpu-$tag-*.whl"
    wheel=$(ls /opt/wheels/$pattern 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -n "$wheel" ]; then
      pip install -q --no-deps "$wheel"
    else
      if [ "$mode" = locked ] && ls /opt/wheels/torch-*+cpu-*.whl >/dev/null 2>&1; then
        log "no torch $want CPU wheel for $tag in /opt/wheels (the lock's version); looking on the indexes"
      fi
      spec=torch${want:+==$want}
      pip install -q --no-deps "$spec" --index-url https://download.pytorch.org/whl/cpu \
        || pip install -q --no-deps "$spec"
    fi
  fi;;
esac
pip install -q $constraints -e ".[$extras]"
if [ "$mode" = gpu ]; then  # the FlashAttention wheel of the set (no extra names it: a beta, GPU only)
  pip install -q $constraints $(grep -E '^flash-attn-4==' "$lock")
fi
echo "$stamp" > "$dir/.codeagent-installed"
