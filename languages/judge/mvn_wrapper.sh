#!/bin/sh
# codeagent's judge for Maven (codeagent/harness/grading/judge/reports.py), first on PATH as `mvn` during a graded
# run: runs the real Maven and records that it started and how it ended, so that a build the tests killed
# (its test JVM can kill its parents: then Maven prints no failure at all) is not read as a build that passed.
real='@REAL@'
dir='@DIR@'
run=$(mktemp "$dir/mvn.XXXXXXXX") || exec "$real" "$@"
echo start > "$run"
"$real" "$@"
code=$?
echo "end $code" >> "$run"
exit $code
