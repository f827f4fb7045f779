#!/bin/sh
# codeagent's judge for Go (codeagent/harness/grading/judge/go.py), first on PATH as `go` during a graded test
# run: `go test` gets a canary test in every package with tests and starts every test binary through the
# launcher; any other go command runs as it is. The canary goes in by -overlay where `go vet` reads
# overlays (Go 1.24 and later: the tree is not touched), else as a file in the package's folder for the
# length of the command. It runs last: a binary whose output lacks it did not run its tests to the end.
real='@REAL@'
dir='@DIR@'
file='@FILE@'
[ "$1" = test ] || exec "$real" "$@"
for arg in "$@"; do
  case "$arg" in
    -overlay|-overlay=*|--overlay|--overlay=*|-exec|-exec=*|--exec|--exec=*)
      echo "the command sets its own -overlay or -exec" >> "$dir/unobserved"
      exec "$real" "$@";;
  esac
done
shift
call=$(mktemp -d "$dir/call.XXXXXXXX") || exec "$real" test "$@"
"$real" list -e -f '{{.Dir}}{{"\t"}}{{.Name}}{{"\t"}}{{len .TestGoFiles}}{{"\t"}}{{len .XTestGoFiles}}' ./... \
  > "$call/packages" 2> "$call/list-errors"
awk -F '\t' -v call="$call" -v template="$dir/canary.go" -v file="$file" '
  BEGIN { while ((getline line < template) > 0) body = body line "\n"; printf "{\"Replace\":{" > (call "/overlay.json") }
  NF >= 4 && $3 + $4 > 0 {
    package = ($4 > 0) ? $2 "_test" : $2
    if (package !~ /^[A-Za-z_][A-Za-z0-9_]*$/) next
    n++
    text = body; gsub(/@PACKAGE@/, package, text)
    source = call "/canary" n ".go"; printf "%s", text > source; close(source)
    target = $1 "/" file; gsub(/\\/, "\\\\", target); gsub(/"/, "\\\"", target)
    printf "%s\"%s\":\"%s\"", (n > 1 ? "," : ""), target, source > (call "/overlay.json")
    print $1 > (call "/canaried"); print source "\t" $1 > (call "/sources")
  }
  END { printf "}}\n" > (call "/overlay.json") }' "$call/packages"
minor=$("$real" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
if [ "${minor:-0}" -ge 24 ]; then
  exec "$real" test -overlay="$call/overlay.json" -exec="$dir/launch" "$@"
fi
# an older go vet reads the package's files from disk, not through the overlay

[ -f "$call/sources" ] && while IFS="$(printf '\t')" read -r source folder; do
  [ -e "$folder/$file" ] || { cp "$source" "$folder/$file" && echo "$folder/$file" >> "$call/placed"; }
done < "$call/sources"
remove() { [ -f "$call/placed" ] && while IFS= read -r placed; do rm -f "$placed"; done < "$call/placed"; }
trap 'remove; exit 130' INT TERM
"$real" test -exec="$dir/launch" "$@"
code=$?
remove
exit $code
