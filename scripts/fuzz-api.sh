#!/usr/bin/env bash
# `make fuzz-api`: schemathesis (property-based, from docs/openapi.yaml)
# against a running siwa: `siwa-demo --serve` (siwa serve with sign-in and
# the admin listener on, its worker, the Apple simulator, a database of its
# own on the demo cluster), with an app key and an admin key. Every
# operation of the document, on its own listener: no 5xx, no answer that
# breaks its schema, status code or content type, no operation that answers
# without its key; then no row written by the junk (no user but the one
# seeded, no notification recorded).
#
# Environment: FUZZ_EXAMPLES (per operation and phase, default 60),
# FUZZ_SEED (default: a fixed one, so a run can be repeated), FUZZ_MAX_TIME
# (seconds per listener, default 60). schemathesis comes from PyPI into
# .build/fuzz-api-venv (python3-venv from apt-get, as root, when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
examples="${FUZZ_EXAMPLES:-60}"
seed="${FUZZ_SEED:-22}"
max_time="${FUZZ_MAX_TIME:-60}"
venv=.build/fuzz-api-venv
work="$(mktemp -d /tmp/siwa-fuzz-api.XXXXXX)"
report=.build/test-artifacts/fuzz-api
mkdir -p "$report"

if [[ ! -x "$venv/bin/schemathesis" ]] || ! "$venv/bin/schemathesis" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
    if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
        if [[ "$(id -u)" = 0 ]] && command -v apt-get >/dev/null 2>&1; then
            echo "python3-venv not found; installing it with apt-get (schemathesis runs in a venv of its own)" >&2
            { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv; } >&2
        else
            echo "error: python3 -m venv does not work (apt-get install python3-venv)" >&2; exit 1
        fi
    fi
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

# siwa, left running until this script ends.
db_url="$(scripts/testdb.sh start demo)"
# The admin listener's limit on failed authentications raised: schemathesis
# presents wrong keys on purpose (its ignored_auth check), and must get the
# 401 of a wrong key, not the 429 of a guesser.
SIWA_DEMO_DATABASE_URL="$db_url" .build/debug/siwa-demo --serve --admin-port 0 --env-file "$work/env" \
    --serve-setting SIWA_ADMIN_AUTH_FAILURES_PER_MINUTE=10000 >"$work/siwa.log" 2>&1 &
demo=$!
stop() {
    status=$?
    if kill -0 "$demo" 2>/dev/null; then
        kill -TERM "$demo"
        # Bounded: siwa-demo stops serve and the worker and drops its database.
        for _ in $(seq 1 300); do kill -0 "$demo" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$demo" 2>/dev/null && kill -KILL "$demo"
    fi
    wait "$demo" 2>/dev/null || true
    cp "$work/siwa.log" "$report/siwa.log" 2>/dev/null || true
    rm -rf "$work"
    exit "$status"
}
trap stop EXIT

for _ in $(seq 1 1200); do
    [[ -f "$work/env" ]] && break
    kill -0 "$demo" 2>/dev/null || { echo "error: siwa-demo stopped:" >&2; tail -50 "$work/siwa.log" >&2; exit 1; }
    sleep 0.1
done
[[ -f "$work/env" ]] || { echo "error: siwa-demo was not ready within 120 s:" >&2; tail -50 "$work/siwa.log" >&2; exit 1; }
# shellcheck disable=SC1091
source "$work/env"

# The document's example user, signed in (through the simulator, as the
# app would), so that the examples phase reaches the 200s of its routes.
sub="$(sed -n "s/^ *example: '\(001[^']*\)'$/\1/p" docs/openapi.yaml | head -n1)"
[[ -n "$sub" ]] || { echo "error: docs/openapi.yaml has no example Apple sub (parameters AppleSubPath)" >&2; exit 1; }
"$venv/bin/python" - "$APPLE_URL" "$SIWA_API_URL" "$SIWA_APP_KEY" "$SIWA_CLIENT_ID" "$sub" <<'EOF'
import sys, urllib.request
apple, api, key, client_id, sub = sys.argv[1:]
authorization = urllib.request.urlopen(urllib.request.Request(
    f"{apple}/simulator/authorize?sub={sub}&client_id={client_id}&email=fuzz@privaterelay.appleid.com", method="POST"), timeout=10).read()
request = urllib.request.Request(f"{api}/v1/sign-in", data=authorization, method="POST",
                                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
answer = urllib.request.urlopen(request, timeout=30)
assert answer.status == 200, answer.status
EOF

checks=not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance,negative_data_rejection,missing_required_header,ignored_auth,unsupported_method
# One worker: with two, hypothesis parses lambdas' source in threads, and
# CPython 3.11's ast then fails at random ("AST constructor recursion depth
# mismatch"), an error of the fuzzer, not of siwa. The time budget bounds it.
# Run from .build/fuzz-api: schemathesis keeps its state (.schemathesis/,
# the crashes it replays first next time) in the working directory.
mkdir -p .build/fuzz-api
run() {
    local name="$1" url="$2"; shift 2
    echo "== schemathesis: the $name listener ($url)"
    (cd .build/fuzz-api && "../../$venv/bin/schemathesis" run ../../docs/openapi.yaml --url "$url" --include-tag "$name" \
        --checks "$checks" --max-examples "$examples" --seed "$seed" --max-time "$max_time" \
        --phases examples,coverage,fuzzing --workers 1 --request-timeout 30 --no-color \
        --report junit --report-junit-path "../../$report/$name.xml" "$@")
}
status=0
run public "$SIWA_PUBLIC_URL" || status=1
run metrics "$SIWA_METRICS_URL" || status=1
run api "$SIWA_API_URL" -H "Authorization: Bearer $SIWA_APP_KEY" || status=1
run admin "$SIWA_ADMIN_URL" -H "Authorization: Bearer $SIWA_ADMIN_KEY" || status=1

# Junk writes nothing: the seeded user is the only one, and the only
# notifications recorded are the simulator's about them (Apple's
# consent-revoked after the examples' DELETE revoked the token).
rows="$(scripts/testdb.sh psql demo -At -c "\\c $SIWA_DEMO_DATABASE" \
    -c "SELECT (SELECT count(*) FROM siwa.users WHERE apple_sub <> '$sub') || ' ' || (SELECT count(*) FROM siwa.notifications WHERE apple_sub <> '$sub')" | tail -n1)"
if [[ "$rows" != "0 0" ]]; then
    echo "error: the fuzz wrote rows: users and notifications of other subs than $sub: '$rows', expected '0 0'" >&2
    status=1
fi
echo "fuzz-api: $([[ $status = 0 ]] && echo passed || echo FAILED) (users, notifications: $rows; reports in $report)"
exit "$status"
