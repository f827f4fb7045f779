#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian/Ubuntu machine: the Docker engine (installed and started
# when none answers), debootstrap (for air-gapped image builds), a virtualenv with codeagent in
# it (the versions of requirements/lock.txt: scripts/venv.sh), and the sandbox base image. Safe to
# run again: what is there already is kept.
#   bash scripts/setup.sh --gpu   the same with .venv-gpu instead: the GPU set of requirements/gpu-lock.txt
#                                 (CUDA torch, vLLM, DeepSpeed, FlashAttention-4; codeagent[train,vllm,deepspeed])
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
log() { printf '[setup] %s\n' "$*" >&2; }

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "${APT_UPDATED:-}" ]; then $SUDO apt-get update -qq; APT_UPDATED=1; fi
  $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

engine_answers() { timeout 10 docker info >/dev/null 2>&1; }

if ! engine_answers; then
  if ! command -v dockerd >/dev/null 2>&1; then
    log "installing the Docker engine (Debian's docker.io)"
    apt_install docker.io
  fi
  if ! engine_answers; then
    log "starting dockerd"
    if command -v systemctl >/dev/null 2>&1 && systemctl is-system-running >/dev/null 2>&1; then
      $SUDO systemctl start docker || true
    fi
    if ! engine_answers; then
      $SUDO sh -c 'nohup dockerd >/var/log/codeagent-dockerd.log 2>&1 &'
    fi
    for _ in $(seq 1 60); do engine_answers && break; sleep 1; done
    engine_answers || { log "dockerd did not start; see /var/log/codeagent-dockerd.log"; exit 1; }
  fi
fi
command -v debootstrap >/dev/null 2>&1 || { log "installing debootstrap"; apt_install debootstrap; }
command -v git >/dev/null 2>&1 || apt_install git
command -v tmux >/dev/null 2>&1 || apt_install tmux  # the TUI's real-terminal test
# a local registry for the prebuilt-image tests (tests/harness/test_prebuilt.py runs its own on 127.0.0.1)
command -v docker-registry >/dev/null 2>&1 || apt_install docker-registry
# headless Chromium and its WebDriver for the viewer's browser test (tests/view/test_view_browser.py)
command -v chromium >/dev/null 2>&1 || apt_install chromium
command -v chromedriver >/dev/null 2>&1 || apt_install chromium-driver

export PYTHON=${PYTHON:-python3}  # scripts/venv.sh makes the virtualenv with it
"$PYTHON" -c "import ensurepip" 2>/dev/null || apt_install python3-venv
EXTRAS=${CODEAGENT_EXTRAS:-dev,llm,data,tui,train,deepspeed,ray,telemetry,view,acp}
# The versions of requirements/lock.txt in .venv; with CODEAGENT_UNLOCKED=1 the newest ones, in .venv-latest.
if [ "${1:-}" = --gpu ]; then
  venv=.venv-gpu; bash scripts/venv.sh .venv-gpu "${CODEAGENT_GPU_EXTRAS:-train,vllm,deepspeed}" gpu
else
  case ${CODEAGENT_UNLOCKED:-} in
    ""|0) venv=.venv; bash scripts/venv.sh .venv "$EXTRAS" locked;;
    *) venv=.venv-latest; bash scripts/venv.sh .venv-latest "$EXTRAS" latest;;
  esac
fi

"$venv/bin/codeagent" sandbox build >/dev/null
log "ready: $venv/bin/codeagent"
