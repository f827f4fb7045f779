#!/usr/bin/env bash
# Evolution, tree search and the tournament end to end through the CLI, on a real repository with the tests'
# scripted model, and (with a trained adapter) on a toy task with the GRPO-trained tiny model; then every
# branch and round exported for training (JSONL, and DPO pairs between siblings).
#
#   bash bench/tts_cli_e2e.sh FLASK_GIT [ADAPTER [TOY_TASK]]
#
# FLASK_GIT: a clone or mirror of pallets/flask holding d8c37f4 (SWE-bench Lite's pallets__flask-4045: a
# blueprint's name must not hold a dot), or - to skip that part. ADAPTER: bench/grpo_learns.py's
# DIR/seed-N/grpo/adapter; TOY_TASK: a held-out verbs task (default verbs-trim).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/site"
python=${PYTHON:-python}
PYTHONPATH="$root" "$python" -c "from tests.support.tts import SITECUSTOMIZE; print(SITECUSTOMIZE)" > "$work/site/sitecustomize.py"
export PYTHONPATH="$work/site:$root" CODEAGENT_TRAJECTORY_DIR="$work/trajectories" CODEAGENT_CONFIG="$work/none.yaml"
codeagent() { "$python" -m codeagent.cli "$@"; }

if [ "$1" != - ]; then
git clone -q "$1" "$work/flask" && git -C "$work/flask" checkout -q d8c37f43724cd9fb0870f77877b7c4c7e38a19e0
printf 'Raise error when blueprint name contains a dot\n\nThis is required since every dot is now significant since blueprints can be nested. An error was already added for endpoint names in 1.0, but should have been added for this as well.\n' > "$work/issue.md"
for method in "--tts evolve --candidates 4 --set scaling.population=2" "--tts search --budget-tokens 400" \
              "--tts sample --candidates 3 --select tournament"; do
  echo "== real repository (pallets/flask at d8c37f4), scripted model: $method"
  # shellcheck disable=SC2086
  codeagent solve --repo "$work/flask" --issue-file "$work/issue.md" --model script:flask --headless $method \
    --set 'scaling.verifiers=[regression, judge]' 2>&1 >"$work/patch" | grep -E "^(search|evolve|sample|chosen|candidate [0-9]|codeagent ·)" || true
  echo "chosen patch: $(grep -c '^+' "$work/patch" || true) added lines; raises ValueError: $(grep -c 'raise ValueError' "$work/patch" || true)"
done
fi

if [ $# -ge 2 ]; then
  adapter=$2
  task=$(PYTHONPATH="$root" "$python" -c "
from codeagent.data.toy import verbs_tasks
t = next(t for t in verbs_tasks('held_out') if t.instance_id == '${3:-verbs-trim}')
print(t.repo); print(t.problem_statement)")
  repo=$(echo "$task" | head -1)
  echo "$task" | tail -n +2 > "$work/toy-issue.md"
  git clone -q "$repo" "$work/toy"
  for method in "--tts evolve --candidates 6 --set scaling.population=2" "--tts search --candidates 6" \
                "--candidates 4 --select tournament"; do
    echo "== toy (held-out verbs task: $(cat "$work/toy-issue.md")), GRPO tiny model: $method"
    # shellcheck disable=SC2086
    (cd "$root" && codeagent solve --repo "$work/toy" --issue-file "$work/toy-issue.md" --model "hf:$adapter" \
      --config evals/toy/agent.yaml --headless $method --set 'scaling.verifiers=[regression, judge]' \
      --set 'scaling.temperatures=[1.0]' 2>&1 >"$work/patch" \
      | grep -E "^(search|evolve|sample|chosen|candidate [0-9])" || true)
    echo "chosen patch: $(grep '^+ ' "$work/patch" || grep '^+    ' "$work/patch" || echo none)"
  done
fi

echo "== every branch and round, exported"
codeagent traj export --format jsonl -o "$work/all.jsonl"
"$python" - "$work/all.jsonl" <<'PY'
import collections, json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print(collections.Counter((row["tts"], row["round"] is not None, bool(row["parents"])) for row in rows))
PY
codeagent traj export --format dpo --pairs siblings --prefer value -o "$work/siblings.jsonl"
