#!/bin/bash
# A fresh data directory: initdb with POSTGRES_USER's password, the init
# scripts on a server that listens on the socket only, then the server for
# everyone (password authentication from other hosts), as the official
# image's entrypoint does.
set -euo pipefail
user=${POSTGRES_USER:-postgres}
if [[ ! -s $PGDATA/PG_VERSION ]]; then
    [[ -n ${POSTGRES_PASSWORD:-} ]] || { echo "POSTGRES_PASSWORD is required" >&2; exit 1; }
    initdb -D "$PGDATA" -U "$user" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") \
        --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    if [[ -n ${POSTGRES_DB:-} && $POSTGRES_DB != postgres ]]; then
        psql -v ON_ERROR_STOP=1 -U "$user" -d postgres -qc "CREATE DATABASE \"$POSTGRES_DB\""
    fi
    for script in /docker-entrypoint-initdb.d/*; do
        case $script in
            *.sql) psql -v ON_ERROR_STOP=1 -U "$user" -d postgres -q -f "$script" ;;
            *.sh) . "$script" ;;
        esac
    done
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec postgres -D "$PGDATA" -c listen_addresses='*'
