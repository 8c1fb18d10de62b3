#!/usr/bin/env bash
# The benchmark: siwa-bench on the throwaway `bench` cluster: the release
# `siwa serve` in its own process under load from wrk, against the pgbench
# ceiling, on a fresh database, a warm one (with a junk flood) and one with
# a million users; then the worker; then sign-in against the Apple simulator
# (`siwa serve` and `siwa worker` in their own processes). Run it with
# `make bench` (release build first); BENCH_ONLY=signin runs one part. wrk
# is installed with apt-get when missing (as root or with sudo).
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
# The bench cluster's owner URL; siwa-bench makes (and drops) a database of
# its own per scenario, migrated as the owner, served as siwa_serve and
# worked as siwa_worker.
export SIWA_BENCH_SERVER_URL="${SIWA_BENCH_SERVER_URL:-$(scripts/testdb.sh start bench)}"
command -v pgbench >/dev/null || { echo "bench: pgbench not found (apt-get install postgresql-contrib)" >&2; exit 1; }
# Figures of an older build would be reported as this tree's.
for binary in .build/release/siwa .build/release/siwa-bench; do
    [[ -x $binary ]] || { echo "bench: $binary missing; run make bench (it builds the release first)" >&2; exit 1; }
    skip=()
    [[ $binary == */siwa ]] && skip=(-path Sources/SIWABench -prune -o)
    newer=$(find Sources sql Package.swift "${skip[@]}" -newer "$binary" -type f -print -quit)
    [[ -z $newer ]] || { echo "bench: $binary is older than $newer; run make bench (it builds the release first)" >&2; exit 1; }
done
exec .build/release/siwa-bench "$@"
