#!/usr/bin/env bash
# The demo: `siwa-demo` (a development tool, not part of the production
# binary) makes a fresh database of its own on the demo cluster, migrates it
# as the owner role, runs `siwa serve` as siwa_serve and `siwa worker` as
# siwa_worker against a simulated Apple, prints what happened, and drops the
# database. Run it with `make demo`, or directly after `swift build`.
#
# SIWA_DEMO_DATABASE_URL: the server, as a role that may CREATE DATABASE
# (default: the `demo` cluster of scripts/testdb.sh, whose owner role `siwa`
# has CREATEDB and whose runtime roles are siwa_serve/siwa_serve and
# siwa_worker/siwa_worker, with siwa_purge for the plan's SQL).
set -euo pipefail
cd "$(dirname "$0")/.."
export SIWA_DEMO_DATABASE_URL="${SIWA_DEMO_DATABASE_URL:-$(scripts/testdb.sh start demo)}"
exec .build/debug/siwa-demo "$@"
