#!/usr/bin/env bash
# Kills every process still carrying SIWA_TEST_RUN_MARKER=MARKER in its
# environment: the children (siwa serve, siwa worker, chromium, pgbench)
# that a test run started and, because it crashed or was killed, did not
# stop. ChildProcess passes the marker on to each child it starts.
#
#   scripts/reap-children.sh MARKER
set -uo pipefail

marker="${1:?usage: reap-children.sh MARKER}"
needle="SIWA_TEST_RUN_MARKER=$marker"

find_marked() {
    local environ pid
    for environ in /proc/[0-9]*/environ; do
        pid="${environ#/proc/}"; pid="${pid%/environ}"
        [[ "$pid" == "$$" ]] && continue
        if { tr "\\0" "\\n" < "$environ"; } 2>/dev/null | grep -qxF "$needle"; then
            printf '%s\n' "$pid"
        fi
    done
}

pids=$(find_marked)
[[ -z "$pids" ]] && exit 0
echo "reap-children: $(wc -w <<<"$pids") process(es) of the test run still running; stopping them:" >&2
for pid in $pids; do
    printf '  %s %s\n' "$pid" "$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-120)" >&2
done
kill -TERM $pids 2>/dev/null || true
for _ in 1 2 3 4 5 6 7 8 9 10; do
    sleep 0.5
    pids=$(find_marked)
    [[ -z "$pids" ]] && exit 0
done
kill -KILL $pids 2>/dev/null || true
