#!/usr/bin/env bash
# Throwaway PostgreSQL clusters for tests, the demo and the benchmark.
#
#   scripts/testdb.sh start   NAME            create (if missing) and start; prints the URL
#   scripts/testdb.sh stop    NAME            fast shutdown, keep data
#   scripts/testdb.sh kill    NAME            immediate shutdown (simulated crash), keep data
#   scripts/testdb.sh url     NAME            print the URL of an existing cluster
#   scripts/testdb.sh status  NAME            exit 0 if running, 3 if not
#   scripts/testdb.sh destroy NAME            stop and delete the cluster directory
#   scripts/testdb.sh psql    NAME [ARGS...]  run psql against the cluster's siwa database
#   scripts/testdb.sh list                    print the names of all clusters
#
# Clusters live in ${SIWA_PG_ROOT:-/tmp/siwa-pg}/NAME (data/, port, url, log).
# The URL is postgres://siwa:siwa@127.0.0.1:PORT/siwa, the schema owner's (for
# siwa migrate); serve and worker connect as their runtime roles, the same URL
# with siwa_serve:siwa_serve or siwa_worker:siwa_worker as user and password
# (siwa_app:siwa_app: one role for both, a trial). A cluster keeps its port
# across stop/start as long as the port is free. Only the URL goes to stdout.
# As root the server runs as the `postgres` user (PostgreSQL is installed with
# apt-get if missing); as any other user it runs as that user.
# Environment: SIWA_PG_ROOT, SIWA_PG_BIN (directory holding postgres/pg_ctl),
# SIWA_PG_PORT_BASE (first port tried, default 25432; another root's
# default is derived from its path).
set -euo pipefail

ROOT="${SIWA_PG_ROOT:-/tmp/siwa-pg}"
# Ports below the kernel's ephemeral range (32768 and up on Linux): there a
# busy test run's own outgoing connections take local ports, and a server
# restarted on a port a client socket holds cannot bind it. Each root scans
# from a port of its own (the default root from 25432), so two checkouts
# testing at once rarely reach for the same one: a cluster restarted by a
# test must find its port free again.
if [[ -z "${SIWA_PG_PORT_BASE:-}" && "$ROOT" != /tmp/siwa-pg ]]; then
    SIWA_PG_PORT_BASE=$((26500 + ($(printf '%s' "$ROOT" | cksum | cut -d' ' -f1) % 25) * 200))
fi
PORT_BASE="${SIWA_PG_PORT_BASE:-25432}"
PORT_LAST=$((PORT_BASE + 999))

# Never let the caller's libpq settings leak into what we run.
unset PGHOST PGHOSTADDR PGPORT PGUSER PGDATABASE PGSERVICE PGOPTIONS PGPASSWORD PGDATA PGSSLMODE || true

log() { printf 'testdb: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# ---------------------------------------------------------------- binaries --

find_bindir() {
    if [[ -n "${SIWA_PG_BIN:-}" ]]; then
        [[ -x "$SIWA_PG_BIN/postgres" ]] || die "SIWA_PG_BIN=$SIWA_PG_BIN has no postgres binary"
        printf '%s\n' "$SIWA_PG_BIN"; return 0
    fi
    local d best=""
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V); do
        [[ -x "$d/postgres" && -x "$d/pg_ctl" && -x "$d/initdb" ]] && best="$d"
    done
    if [[ -z "$best" ]]; then
        # Not Debian's layout: take whatever pg_ctl on PATH belongs to.
        local p
        if p="$(command -v pg_ctl 2>/dev/null)"; then
            p="$(dirname "$(readlink -f "$p")")"
            [[ -x "$p/postgres" && -x "$p/initdb" ]] && best="$p"
        fi
    fi
    [[ -n "$best" ]] && printf '%s\n' "$best"
}

install_postgres() {
    local sudo=()
    if [[ $EUID -ne 0 ]]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo=(sudo -n)
        else
            die "the PostgreSQL server is not installed (no /usr/lib/postgresql/*/bin/postgres); install postgresql-15 and postgresql-contrib, or run this script as root"
        fi
    fi
    command -v apt-get >/dev/null 2>&1 || die "the PostgreSQL server is not installed and apt-get is not available; install PostgreSQL (server, contrib, client) and retry"
    log "PostgreSQL server not found; installing it with apt-get (a minute or so)"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq >&2
    if ! "${sudo[@]}" apt-get install -y -q postgresql-15 postgresql-contrib >&2; then
        log "postgresql-15 not installable here; trying the distribution's default version"
        "${sudo[@]}" apt-get install -y -q postgresql postgresql-contrib >&2
    fi
}

BIN="$(find_bindir || true)"
need_bin() {
    if [[ -z "$BIN" ]]; then
        install_postgres
        BIN="$(find_bindir || true)"
        [[ -n "$BIN" ]] || die "PostgreSQL installed but no server binary found in /usr/lib/postgresql/*/bin"
    fi
}

# ----------------------------------------------------------- run-as user --

RUNAS=""        # empty: run as ourselves
if [[ $EUID -eq 0 ]]; then RUNAS=postgres; fi

ensure_runas_user() {
    [[ -z "$RUNAS" ]] && return 0
    if ! getent passwd "$RUNAS" >/dev/null; then
        log "creating system user $RUNAS"
        useradd --system --home-dir /var/lib/postgresql --no-create-home --shell /bin/sh "$RUNAS"
    fi
}

# Run a command as the cluster's owner, from a directory that owner can enter.
# fd 9 (our lock) is closed so a started postmaster does not hold it forever.
as_pg() {
    if [[ -z "$RUNAS" ]]; then
        (cd / && exec 9<&- && "$@")
    elif command -v runuser >/dev/null 2>&1; then
        (cd / && exec 9<&- && runuser -u "$RUNAS" -- "$@")
    else
        local q; q="$(printf '%q ' "$@")"
        (cd / && exec 9<&- && su "$RUNAS" -s /bin/sh -c "$q")
    fi
}

# ----------------------------------------------------------------- paths --

NAME=""
DIR=""
DATA=""

set_cluster() {
    NAME="$1"
    [[ "$NAME" =~ ^[A-Za-z0-9_.-]+$ && "$NAME" != "." && "$NAME" != ".." ]] \
        || die "bad cluster name '$NAME' (letters, digits, . _ - only)"
    DIR="$ROOT/$NAME"
    DATA="$DIR/data"
    # The unix socket lives in $DIR; sun_path holds at most 107 bytes.
    (( ${#DIR} + 18 <= 107 )) || die "cluster directory path '$DIR' is too long for a unix socket; use a shorter SIWA_PG_ROOT"
    # An existing cluster is run by whoever owns its data directory.
    if [[ $EUID -eq 0 && -d "$DATA" ]]; then
        local owner; owner="$(stat -c %U "$DATA")"
        if [[ "$owner" != root && "$owner" != UNKNOWN ]]; then RUNAS="$owner"; fi
    fi
}

url_for() { printf 'postgres://siwa:siwa@127.0.0.1:%s/siwa' "$1"; }

ensure_root_dir() {
    if [[ ! -d "$ROOT" ]]; then
        mkdir -p "$ROOT"
        chmod 1777 "$ROOT"   # shared like /tmp: root, postgres and plain users can all add clusters
    fi
}

# One lock for every state-changing operation, so concurrent starts cannot
# pick the same port or race initdb.
take_lock() {
    ensure_root_dir
    local lock="$ROOT/.lock"
    if [[ ! -e "$lock" ]]; then
        : >>"$lock" 2>/dev/null || true
        chmod 666 "$lock" 2>/dev/null || true
    fi
    exec 9<"$lock" || die "cannot open lock file $lock"
    flock 9
}

is_running() {
    [[ -f "$DATA/PG_VERSION" ]] || return 1
    as_pg "$BIN/pg_ctl" status -D "$DATA" >/dev/null 2>&1
}

# ----------------------------------------------------------------- ports --

port_in_use() {
    local p="$1"
    if command -v ss >/dev/null 2>&1; then
        # Any TCP socket on it, listening or not (a client's local port too),
        # except TIME-WAIT: what a stopped server leaves behind, which its
        # own restart on the same port binds past (SO_REUSEADDR).
        if ss -Htan "( sport = :$p )" 2>/dev/null | grep -qv '^TIME-WAIT'; then return 0; fi
    fi
    # Anything accepting connections on it?
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then return 0; fi
    return 1
}

port_claimed_by_other_cluster() {
    local p="$1" f
    for f in "$ROOT"/*/port; do
        [[ -f "$f" ]] || continue
        [[ "$f" == "$DIR/port" ]] && continue
        [[ "$(cat "$f" 2>/dev/null)" == "$p" ]] && return 0
    done
    return 1
}

pick_port() {
    local p
    for ((p = PORT_BASE; p <= PORT_LAST; p++)); do
        port_claimed_by_other_cluster "$p" && continue
        port_in_use "$p" && continue
        printf '%s\n' "$p"; return 0
    done
    die "no free port in $PORT_BASE-$PORT_LAST"
}

write_conf() {
    local port="$1"
    # Rewritten at every start so a changed port takes effect.
    cat >"$DIR/siwa.conf.tmp" <<EOF
# Managed by scripts/testdb.sh; rewritten at every start.
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$DIR'
max_connections = 1000
shared_buffers = 128MB
fsync = on
synchronous_commit = on
full_page_writes = on
logging_collector = off
log_line_prefix = '%m [%p] %q%u@%d '
EOF
    if [[ -n "$RUNAS" ]]; then chown "$RUNAS" "$DIR/siwa.conf.tmp"; fi
    mv -f "$DIR/siwa.conf.tmp" "$DATA/siwa.conf"
}

write_port_and_url() {
    local port="$1"
    printf '%s\n' "$port" >"$DIR/port.tmp" && mv -f "$DIR/port.tmp" "$DIR/port"
    printf '%s\n' "$(url_for "$port")" >"$DIR/url.tmp" && mv -f "$DIR/url.tmp" "$DIR/url"
    chmod 644 "$DIR/port" "$DIR/url"
}

# ------------------------------------------------------------- commands --

# Roles and database (idempotent, cheap), at every start, also of a cluster
# that was already running (made by an older version of this script).
ensure_roles_and_database() {
    local port="$1"
    # Roles and database (idempotent, cheap), as in production: `siwa` owns
    # the schema (siwa migrate; CREATEDB so tests can make databases of
    # their own), `siwa_serve` and `siwa_worker` are the runtime roles of
    # serve and worker (they own nothing; siwa migrate grants each what its
    # process needs), `siwa_purge` is the role the purge plan's SQL steps
    # run as, and `siwa_app` is the one role of a trial that shares one
    # between serve and worker. None is a superuser. Authentication is
    # `trust` on loopback: the passwords are only there because the URLs
    # carry them.
    local psql=(as_pg "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$DIR" -p "$port" -U postgres)
    "${psql[@]}" -d postgres >&2 <<'SQL'
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'siwa') THEN
    CREATE ROLE siwa LOGIN PASSWORD 'siwa';
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'siwa_app') THEN
    CREATE ROLE siwa_app LOGIN PASSWORD 'siwa_app';
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'siwa_serve') THEN
    CREATE ROLE siwa_serve LOGIN PASSWORD 'siwa_serve';
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'siwa_worker') THEN
    CREATE ROLE siwa_worker LOGIN NOINHERIT PASSWORD 'siwa_worker';
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'siwa_purge') THEN
    CREATE ROLE siwa_purge NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'siwa_auditor') THEN
    CREATE ROLE siwa_auditor NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'siwa_admin') THEN
    CREATE ROLE siwa_admin NOLOGIN;
  END IF;
END
$$;
-- Clusters made by older versions of this script had a superuser siwa.
ALTER ROLE siwa NOSUPERUSER CREATEDB NOCREATEROLE;
ALTER ROLE siwa_app NOSUPERUSER NOCREATEDB NOCREATEROLE;
ALTER ROLE siwa_serve NOSUPERUSER NOCREATEDB NOCREATEROLE;
ALTER ROLE siwa_worker NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
-- The purge plan's SQL steps run as siwa_purge (SET LOCAL ROLE): the
-- worker's role may become it and, NOINHERIT, holds its grants only then;
-- siwa_app, the one-role trial's, may too.
GRANT siwa_purge TO siwa_worker, siwa_app;
-- A role named like the schema finds "$user" = siwa first in its default
-- search_path, so its unqualified CREATE TABLE would land in siwa's schema,
-- where no plan step looks (production names the owner siwa_owner).
ALTER ROLE siwa SET search_path = public;
SQL
    if [[ $NAME == bench ]]; then
        # siwa-bench starts its rounds on a large database right after a
        # checkpoint, so full-page images fall where it says.
        "${psql[@]}" -d postgres -c "GRANT pg_checkpoint TO siwa" >&2
    fi
    if [[ "$("${psql[@]}" -d postgres -Atc "SELECT 1 FROM pg_database WHERE datname = 'siwa'")" != 1 ]]; then
        "${psql[@]}" -d postgres -c "CREATE DATABASE siwa OWNER siwa" >&2
    fi
}

cmd_start() {
    need_bin
    ensure_runas_user
    take_lock

    if is_running; then
        log "cluster '$NAME' already running ($DIR)"
        [[ -f "$DIR/url" && -f "$DIR/port" ]] || die "cluster '$NAME' is running but $DIR/url is missing"
        ensure_roles_and_database "$(cat "$DIR/port")"
        cat "$DIR/url"
        return 0
    fi

    if [[ ! -f "$DATA/PG_VERSION" ]]; then
        log "creating cluster '$NAME' in $DIR with $BIN"
        rm -rf "$DATA"
        mkdir -p "$DIR"
        if [[ -n "$RUNAS" ]]; then chown "$RUNAS" "$DIR"; fi
        chmod 755 "$DIR"
        as_pg test -w "$DIR" || die "$DIR is not writable by user ${RUNAS:-$(id -un)}; set SIWA_PG_ROOT to a directory it can use"
        as_pg "$BIN/initdb" -D "$DATA" -U postgres -E UTF8 --locale=C.UTF-8 \
              --auth-local=trust --auth-host=trust >"$DIR/initdb.log" 2>&1 \
            || as_pg "$BIN/initdb" -D "$DATA" -U postgres -E UTF8 --locale=C \
              --auth-local=trust --auth-host=trust >"$DIR/initdb.log" 2>&1 \
            || { cat "$DIR/initdb.log" >&2; die "initdb failed"; }
        echo "include 'siwa.conf'" >>"$DATA/postgresql.conf"
    fi

    local port=""
    if [[ -f "$DIR/port" ]]; then
        port="$(cat "$DIR/port")"
        if (( port < PORT_BASE || port > PORT_LAST )); then
            port=""  # from an older version of this script (or another base)
        elif port_in_use "$port"; then
            log "port $port of cluster '$NAME' is taken by another process; choosing a new one"
            port=""
        fi
    fi
    [[ -n "$port" ]] || port="$(pick_port)"

    # The port can be taken between the check and the server's bind (another
    # cluster root starting at the same moment, e.g. two checkouts testing at
    # once): then a new port, a few times over.
    local attempt
    for attempt in 1 2 3 4 5; do
        write_conf "$port"
        write_port_and_url "$port"
        log "starting cluster '$NAME' on 127.0.0.1:$port (log: $DIR/log)"
        local before=0
        [[ -f "$DIR/log" ]] && before=$(wc -l <"$DIR/log")
        if as_pg "$BIN/pg_ctl" start -D "$DATA" -l "$DIR/log" -w -t 180 >&2; then
            break
        fi
        if [[ $attempt -lt 5 ]] && tail -n +"$((before + 1))" "$DIR/log" 2>/dev/null | grep -q 'could not bind\|could not create any TCP/IP sockets'; then
            log "port $port was taken while the server started; choosing a new one"
            port="$(pick_port)"
            continue
        fi
        log "server did not start; last lines of $DIR/log:"
        tail -n 30 "$DIR/log" >&2 || true
        exit 1
    done

    ensure_roles_and_database "$port"

    cat "$DIR/url"
}

cmd_stop() {  # $1: fast | immediate
    need_bin
    take_lock
    [[ -d "$DIR" ]] || die "no cluster '$NAME' in $ROOT"
    if ! is_running; then
        log "cluster '$NAME' is not running"
        return 0
    fi
    log "stopping cluster '$NAME' (-m $1)"
    as_pg "$BIN/pg_ctl" stop -D "$DATA" -m "$1" -w -t 120 >&2
}

cmd_url() {
    [[ -f "$DIR/url" ]] || die "no cluster '$NAME' in $ROOT (run: $0 start $NAME)"
    cat "$DIR/url"
}

cmd_status() {
    [[ -d "$DIR" ]] || { log "no cluster '$NAME'"; exit 3; }
    need_bin
    if is_running; then log "cluster '$NAME' running: $(cat "$DIR/url")"; return 0; fi
    log "cluster '$NAME' stopped"; exit 3
}

cmd_destroy() {
    need_bin
    take_lock
    if [[ ! -d "$DIR" ]]; then log "no cluster '$NAME'; nothing to do"; return 0; fi
    if is_running; then
        log "stopping cluster '$NAME'"
        as_pg "$BIN/pg_ctl" stop -D "$DATA" -m immediate -w -t 60 >&2 || true
    fi
    [[ -n "$NAME" && "$DIR" == "$ROOT/$NAME" ]] || die "refusing to remove '$DIR'"
    rm -rf -- "$DIR"
    log "removed $DIR"
}

cmd_psql() {
    need_bin
    local url; url="$(cmd_url)"
    exec "$BIN/psql" -X "$url" "$@"
}

cmd_list() {
    local d
    for d in "$ROOT"/*/; do
        [[ -d "$d" ]] || continue
        basename "$d"
    done
}

# ----------------------------------------------------------------- main --

[[ $# -ge 1 ]] || usage
cmd="$1"; shift
case "$cmd" in
    list) cmd_list; exit 0 ;;
    -h|--help|help) usage ;;
esac
[[ $# -ge 1 ]] || usage
set_cluster "$1"; shift
case "$cmd" in
    start)   [[ $# -eq 0 ]] || usage; cmd_start ;;
    stop)    [[ $# -eq 0 ]] || usage; cmd_stop fast ;;
    kill)    [[ $# -eq 0 ]] || usage; cmd_stop immediate ;;
    url)     [[ $# -eq 0 ]] || usage; cmd_url ;;
    status)  [[ $# -eq 0 ]] || usage; cmd_status ;;
    destroy) [[ $# -eq 0 ]] || usage; cmd_destroy ;;
    psql)    cmd_psql "$@" ;;
    *)       usage ;;
esac
