#!/usr/bin/env bash
# The wheels of bench/gpu_wheels.txt, for Python 3.12 on x86_64 Linux, into .whl/ (what bench/gpu_grpo_step.py's
# docstring installs on a GPU machine without internet). Run where PyPI is reachable.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -v '^#' bench/gpu_wheels.txt | grep -v '^$' > .whl.list
trap 'rm -f .whl.list' EXIT
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  -d .whl -r .whl.list
du -sh .whl
