#!/usr/bin/env bash
# The benchmark (stub): migrate the bench database, then `siwa bench`.
# Run it with `make bench`, or directly after `swift build -c release`.
set -euo pipefail
cd "$(dirname "$0")/.."
export SIWA_DATABASE_URL="${SIWA_DATABASE_URL:-$(scripts/testdb.sh start bench)}"
.build/release/siwa migrate
exec .build/release/siwa bench "$@"
