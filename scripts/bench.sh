#!/usr/bin/env bash
# The benchmark: a fresh database on the throwaway `bench` cluster, migrated,
# then siwa-bench: the release `siwa serve` in its own process under load
# from wrk, and the pgbench ceiling. Run it with `make bench` (release build
# first). wrk is installed with apt-get when missing (as root or with sudo).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v wrk >/dev/null; then
    sudo=()
    [[ $EUID -ne 0 ]] && sudo=(sudo -n)
    echo "bench: wrk not found; installing it with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q wrk >&2 ||
        { DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get update -qq >&2 &&
          DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q wrk >&2; } ||
        { echo "bench: cannot install wrk; install it (apt-get install wrk) and retry" >&2; exit 1; }
fi
server_url="${SIWA_DATABASE_URL:-$(scripts/testdb.sh start bench)}"
db="bench_$(date +%s)"
command -v pgbench >/dev/null || { echo "bench: pgbench not found (apt-get install postgresql-contrib)" >&2; exit 1; }
psql -q "$server_url" -c "CREATE DATABASE $db"
# Dropped on failure too, so failed runs do not pile up on the cluster.
trap 'psql -q "$server_url" -c "DROP DATABASE IF EXISTS $db" || true' EXIT
export SIWA_DATABASE_URL="${server_url%/*}/$db"
.build/release/siwa migrate
.build/release/siwa-bench "$@"
