#!/usr/bin/env bash
# make's set-up steps, talkative: local/step.sh NAME COMMAND [ARG...]
# Says NAME as it starts, a line every 5 s while COMMAND runs (no long silence, however quiet the
# command), and NAME's duration when it ends; exits with COMMAND's status.
name=$1
shift
start=$(date +%s.%N)
elapsed() { awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }
echo "==> $name"
( while sleep 5; do echo "    ... $name: $(elapsed) s so far"; done ) &
beat=$!
"$@"
status=$?
kill "$beat" 2>/dev/null
wait "$beat" 2>/dev/null
if [ "$status" -eq 0 ]; then
	echo "<== $name: done in $(elapsed) s"
else
	echo "<== $name: FAILED (exit $status) after $(elapsed) s"
fi
exit "$status"
