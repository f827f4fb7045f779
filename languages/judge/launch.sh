#!/bin/sh
# codeagent's judge: starts one test binary (go test -exec), keeps what the judge needs of its run —
# the folder it ran in, its arguments, the tests its output reports, whether the canary's secret is
# there, its real exit status — and exits as the binary would have without the canary.
dir='@DIR@'
canary='@CANARY@'
secret='@SECRET@'
run=$(mktemp "$dir/runs/run.XXXXXXXX") || exec "$@"
pwd > "$run.dir"
printf '%s\n' "$@" > "$run.args"
{ CODEAGENT_CANARY_@NONCE@=1 "$@" 2>&1; echo "$?" > "$run.code"; } | tee "$run.out"
code=$(cat "$run.code" 2>/dev/null)
[ -n "$code" ] || code=1
awk -v secret="$secret" '
  { line = $0; sub(/^[ \t\026]+/, "", line) }
  line ~ /^--- (PASS|FAIL|SKIP): / { split(line, word, " "); print substr(word[2], 1, 1), word[3] }
  index($0, secret) { print "secret" }
  line ~ /^panic: / { print "panic" }' "$run.out" > "$run.facts"
rm -f "$run.out"
if [ "$code" != 0 ] && grep -qx "F $canary" "$run.facts" && ! grep -q '^panic$' "$run.facts" \
   && [ "$(grep -c '^F ' "$run.facts")" = 1 ]; then
  exit 0
fi
exit "$code"
