#!/usr/bin/env bash
# Write requirements/gpu-lock.txt: the GPU set (codeagent[train,vllm,deepspeed] with torch, vLLM, DeepSpeed and the
# FlashAttention wheel there is) resolved TOGETHER by pip's own resolver against PyPI, without installing
# anything: `pip install --dry-run --ignore-installed --report`, in a new virtualenv. `bash scripts/setup.sh --gpu`
# installs it (pip install -c requirements/gpu-lock.txt) into .venv-gpu. The CPU lock (requirements/lock.txt) is
# another set: vLLM 0.29-0.30 pin torch 2.13, the CPU lock has 2.15, so the two never share a virtualenv.
#   bash scripts/gpu_lock.sh            (PyPI reachable; ~5 minutes: metadata only, DeepSpeed's sdist built)
# FlashAttention: `flash-attn` (2.x) is a source distribution only on PyPI (it compiles against CUDA at install);
# `flash-attn-4` (the CuTe DSL kernels, Hopper and Blackwell, beta) is a wheel: that one is in the set.
set -euo pipefail
cd "$(dirname "$0")/.."
lock=requirements/gpu-lock.txt
vllm=0.30.0 deepspeed=0.19.8 flash=4.0.0b36
work=$(mktemp -d "${TMPDIR:-/tmp}/codeagent-gpu-lock.XXXXXX")
trap 'rm -rf "$work"' EXIT
"${PYTHON:-python3}" -m venv "$work/venv"
py=$work/venv/bin/python
"$py" -m pip install -q --upgrade pip
"$py" -m pip install --dry-run --ignore-installed -q --report "$work/report.json" \
  "vllm==$vllm" "deepspeed==$deepspeed" "flash-attn-4==$flash" -e ".[train,vllm,deepspeed]"
where=$("$py" -c 'import platform; print(platform.system(), platform.machine(), platform.python_implementation(), platform.python_version())')
{
  cat <<EOF
# The GPU set \`bash scripts/setup.sh --gpu\` installs into .venv-gpu (pip install -c this file), resolved together
# by pip's resolver on $(date -u +%F) on $where with pip $("$py" -m pip --version | cut -d' ' -f2), nothing installed:
#   pip install --dry-run --ignore-installed --report R.json vllm==$vllm deepspeed==$deepspeed flash-attn-4==$flash -e '.[train,vllm,deepspeed]'
# (bash scripts/gpu_lock.sh). torch is vLLM's pin (CUDA build from PyPI). Not the CPU lock (requirements/lock.txt:
# torch 2.15): never install one into the other's virtualenv. A package named nowhere below (another platform's or
# another Python's dependency) resolves freely.
EOF
  "$py" - "$work/report.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
pins = sorted((item["metadata"]["name"], item["metadata"]["version"]) for item in report["install"]
              if item["metadata"]["name"].lower() != "codeagent")
print("\n".join(f"{name}=={version}" for name, version in sorted(pins, key=lambda pin: pin[0].lower())))
PY
} > "$lock.new"
mv "$lock.new" "$lock"
echo "[gpu-lock] wrote $lock: $(grep -vc '^#' "$lock") pins" >&2
