#!/usr/bin/env bash
# The demo: migrate the demo database, then `siwa demo` (starts the Apple
# simulator and the server, sends notifications, prints what happened).
# Run it with `make demo`, or directly after `swift build`.
set -euo pipefail
cd "$(dirname "$0")/.."
export SIWA_DATABASE_URL="${SIWA_DATABASE_URL:-$(scripts/testdb.sh start demo)}"
.build/debug/siwa migrate
exec .build/debug/siwa demo "$@"
