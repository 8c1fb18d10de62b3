#!/usr/bin/env bash
# The benchmark: a fresh database on the throwaway `bench` cluster, migrated,
# then siwa-bench (siwa in-process, real HTTP load, pgbench ceiling).
# Run it with `make bench` (release build first).
set -euo pipefail
cd "$(dirname "$0")/.."
server_url="${SIWA_DATABASE_URL:-$(scripts/testdb.sh start bench)}"
db="bench_$(date +%s)"
psql -q "$server_url" -c "CREATE DATABASE $db"
export SIWA_DATABASE_URL="${server_url%/*}/$db"
command -v pgbench >/dev/null || { echo "bench: pgbench not found (apt-get install postgresql-contrib)" >&2; exit 1; }
.build/release/siwa migrate
.build/release/siwa-bench "$@"
psql -q "$server_url" -c "DROP DATABASE $db" || true
