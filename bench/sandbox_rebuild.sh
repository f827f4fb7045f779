#!/bin/bash
# Does a sandbox compile again what its image's build already compiled? Two checkouts side by side (a baseline
# and the code under test, e.g. `git worktree add --detach /tmp/old 3308ed6`), each running
# `codeagent sandbox run --repo MIRROR` (the repository's own tests) twice on every repository given: the first
# run builds the layers, the second is a cached start. Prints the wall seconds and the objects the test run
# compiled (CMake's "Building C/CXX object" lines).
#
#   bash bench/sandbox_rebuild.sh OLD_CHECKOUT NEW_CHECKOUT MIRROR... [> results]
set -u
old=$1 new=$2
shift 2
out=$(mktemp -d)
python=${PYTHON:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python}
for repo in "$@"; do
  for side in new old; do
    checkout=$([ "$side" = new ] && echo "$new" || echo "$old")
    for run in 1 2; do
      name=$(basename "$(dirname "$repo")")-$side-$run
      start=$(date +%s)
      (cd "$checkout" && PYTHONPATH="$checkout" "$python" -m codeagent.cli sandbox run --repo "$repo" --timeout 1500 \
        > "$out/$name.out" 2> "$out/$name.err")
      echo "$(basename "$(dirname "$repo")") $side run$run: $(( $(date +%s) - start )) s," \
        "compiled objects in the test run: $(grep -c 'Building C' "$out/$name.out")," \
        "$(grep '^tests:' "$out/$name.err")"
    done
  done
done
echo "logs: $out"
