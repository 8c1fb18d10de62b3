#!/usr/bin/env bash
# `make test-python-example`: the Python example backend (examples/python)
# tested as ExampleBackendTests tests the Swift one. pytest runs
#   - its unit tests (tests/test_client.py): the generated client decodes
#     answers and events with fields docs/openapi.yaml does not list; the
#     committed client (examples/python/siwaclient) is what
#     openapi-python-client makes of the document now; docs/openapi.yaml and
#     docs/openapi-3.0.yaml are valid OpenAPI; the webhook route refuses a
#     forged, tampered or old event;
#   - the end-to-end test (tests/test_end_to_end.py) against a real siwa:
#     `siwa-demo --serve` (serve with sign-in on, its worker, the Apple
#     simulator, a database of its own on the `python` cluster) with the
#     worker's app events sent to the example app, started here as a process
#     of its own: sign-in, look-up, Apple's account-delete, the in-app
#     deletion, and every app event of that story delivered and verified.
#
# Needs the debug build (.build/debug/siwa-demo, siwa; `make
# test-python-example` builds it). Python 3.11 or later with venv; the
# packages (examples/python/requirements-dev.txt, pinned) come from PyPI into
# .build/python-example-venv, made again when the requirements change.
# Everything started is stopped at the end; every wait has a deadline.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

venv=.build/python-example-venv
requirements=examples/python/requirements-dev.txt
work="$(mktemp -d /tmp/siwa-python-example.XXXXXX)"
report=.build/test-artifacts/python-example
mkdir -p "$report"
started=$(date +%s)

demo="" app=""
stop() {
    status=$?
    for pid in $app $demo; do
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid"
            # Bounded: siwa-demo stops serve and the worker and drops its database.
            for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
        fi
        wait "$pid" 2>/dev/null || true
    done
    cp "$work/siwa.log" "$report/siwa.log" 2>/dev/null || true
    cp "$work/example.log" "$report/example.log" 2>/dev/null || true
    rm -rf "$work"
    [[ $status = 0 ]] || echo "test-python-example: FAILED (logs in $report)" >&2
    exit "$status"
}
trap stop EXIT

# The venv, made again when the pinned requirements change.
python=""
for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
        python="$candidate"; break
    fi
done
[[ -n "$python" ]] || { echo "error: no Python 3.11 or later (the generated client needs it)" >&2; exit 1; }
stamp="$(sha256sum examples/python/requirements.txt "$requirements" | sha256sum | cut -c1-16)"
if [[ ! -x "$venv/bin/python" ]] || [[ "$(cat "$venv/.requirements" 2>/dev/null)" != "$stamp" ]]; then
    if ! "$python" -m venv --help >/dev/null 2>&1 || ! "$python" -c 'import ensurepip' >/dev/null 2>&1; then
        if [[ "$(id -u)" = 0 ]] && command -v apt-get >/dev/null 2>&1; then
            echo "python3-venv not found; installing it with apt-get (the example's packages go into a venv)" >&2
            { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv; } >&2
        else
            echo "error: $python -m venv does not work (apt-get install python3-venv)" >&2; exit 1
        fi
    fi
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
    echo "$stamp" > "$venv/.requirements"
fi

for binary in siwa siwa-demo; do
    [[ -x .build/debug/$binary ]] || { echo "error: .build/debug/$binary is missing: swift build (make test-python-example builds it)" >&2; exit 1; }
done
free_port() {
    "$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
example_port="$(free_port)"
example_url="http://127.0.0.1:$example_port"

# siwa, its app events sent to the example (the env file then holds their secret).
db_url="$(scripts/testdb.sh start python)"
SIWA_DEMO_DATABASE_URL="$db_url" .build/debug/siwa-demo --serve --admin-port 0 --env-file "$work/env" \
    --app-webhook-url "$example_url/siwa/events" >"$work/siwa.log" 2>&1 &
demo=$!
for _ in $(seq 1 1200); do
    [[ -f "$work/env" ]] && break
    kill -0 "$demo" 2>/dev/null || { echo "error: siwa-demo stopped:" >&2; tail -50 "$work/siwa.log" >&2; exit 1; }
    sleep 0.1
done
[[ -f "$work/env" ]] || { echo "error: siwa-demo was not ready within 120 s:" >&2; tail -50 "$work/siwa.log" >&2; exit 1; }
set -a
# shellcheck disable=SC1091
source "$work/env"
set +a
[[ -n "${SIWA_APP_WEBHOOK_SECRET:-}" ]] || { echo "error: siwa-demo's env file has no SIWA_APP_WEBHOOK_SECRET (--app-webhook-url)" >&2; exit 1; }

# The example app, as its README starts it.
(cd examples/python && EXAMPLE_API_URL="$SIWA_API_URL" EXAMPLE_API_KEY="$SIWA_APP_KEY" \
    EXAMPLE_WEBHOOK_SECRET="$SIWA_APP_WEBHOOK_SECRET" EXAMPLE_HOST=127.0.0.1 EXAMPLE_PORT="$example_port" \
    PYTHONUNBUFFERED=1 exec "$root/$venv/bin/python" app.py) >"$work/example.log" 2>&1 &
app=$!
up=""
for _ in $(seq 1 300); do
    kill -0 "$app" 2>/dev/null || { echo "error: the example app stopped:" >&2; tail -50 "$work/example.log" >&2; exit 1; }
    if "$venv/bin/python" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/healthz", timeout=2)' "$example_url" 2>/dev/null; then
        up=1; break
    fi
    sleep 0.1
done
[[ -n "$up" ]] || { echo "error: the example app did not answer within 30 s:" >&2; tail -50 "$work/example.log" >&2; exit 1; }

status=0
(cd examples/python && SIWA_EXAMPLE_E2E=1 EXAMPLE_URL="$example_url" EXAMPLE_LOG="$work/example.log" \
    timeout 600 "$root/$venv/bin/python" -m pytest -p no:cacheprovider -rs -v \
        --junitxml="$root/$report/junit.xml" tests) || status=$?
echo "test-python-example: $([[ $status = 0 ]] && echo passed || echo FAILED) in $(( $(date +%s) - started )) s"
exit "$status"
