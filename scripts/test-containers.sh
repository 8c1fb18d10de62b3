#!/usr/bin/env bash
# make test-containers: siwa's image, deploy/compose.yaml and
# deploy/kubernetes/ run for real under podman.
#   1. The images: the runtime (the production image) and the simulator
#      (development only), built from make build-static's binaries on a
#      Debian 12 base made here (no registry is reachable: debootstrap from
#      the machine's own apt source, then podman import); their sizes.
#   2. The image: `siwa migrate`, `siwa serve` and `siwa worker` as
#      containers against the test cluster (host network), secrets from
#      files; a sign-in, one notification of each type from the simulator,
#      four 200s, the purge completed and its ledger line in the worker's
#      volume, the HEALTHCHECK healthy.
#   3. deploy/compose.yaml under podman-compose, with the images built here
#      (and a PostgreSQL image made from Debian's package): the README's curl
#      session (sign-in, look-up, deletion) against it.
#   4. deploy/kubernetes/: serve's and the worker's Deployments played by
#      `podman kube play` against the test cluster; a notification through
#      them, and the purge done by the played worker.
# Ends with one line: "containers: N passed, N failed".
#
#   scripts/test-containers.sh SERVER_URL
# SERVER_URL: the owner's URL of a scripts/testdb.sh cluster; databases
# siwa_image and siwa_kube are made (and dropped) beside it.
# IMAGE, SIMULATOR_IMAGE: the names to build (localhost/...).
set -euo pipefail
cd "$(dirname "$0")/.."

server_url=$1
image=${IMAGE:-localhost/siwa:test}
simulator_image=${SIMULATOR_IMAGE:-localhost/siwa-simulator:test}
base=localhost/debian:bookworm-local
postgres_image=localhost/siwa-test-postgres:15
export CONTAINERS_CONF=$PWD/scripts/containers.conf
work=$(mktemp -d /tmp/siwa-containers.XXXXXX)
chmod 0755 "$work"
label=siwa-test-containers=$$
client_id=com.example.siwa.demo

passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; [[ -z "${2:-}" ]] || printf '%s\n' "$2" | tail -n 40 | sed 's/^/     /'; }
check() { # NAME COMMAND...: passes when COMMAND succeeds; its output is shown when it fails
    local name=$1 output; shift
    if output=$("$@" 2>&1); then pass "$name"; else fail "$name" "$output"; fi
}
# eventually SECONDS COMMAND...: COMMAND until it succeeds, at most SECONDS.
eventually() {
    local deadline=$((SECONDS + $1)); shift
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 1
    done
}
# A JSON field of stdin: json KEY[.KEY...]
json() { python3 -c 'import json,sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."): v = v.get(k) if isinstance(v, dict) else None
print("" if v is None else v)' "$1"; }
podman() { command podman "$@" 2> >(grep -v 'systemd connection\|failed to connect to syslog' >&2); }
admin() { PGOPTIONS='-c client_min_messages=warning' scripts/testdb.sh psql test -v ON_ERROR_STOP=1 -qAtc "$1"; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
logs() { podman logs "$1" 2>&1 | tail -n 30; }

cleanup() {
    set +e
    [[ -f $work/kube.yaml ]] && podman kube down "$work/kube.yaml" >/dev/null 2>&1
    podman volume rm -f siwa-erasures >/dev/null 2>&1  # the played worker's claim
    [[ -f $work/compose.env ]] && (set -a; . "$work/compose.env"; podman-compose -p siwa-test -f deploy/compose.yaml down -v >/dev/null 2>&1)
    podman ps -aq --filter "label=$label" | xargs -r podman rm -f -v >/dev/null 2>&1
    podman volume ls -q --filter "label=$label" | xargs -r podman volume rm -f >/dev/null 2>&1
    for db in siwa_image siwa_kube; do admin "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1; done
    rm -rf "$work"
}
trap cleanup EXIT
# What an earlier run that was killed left (its containers, pods and volumes
# carry the label, whatever its run's number).
podman ps -aq --filter label=siwa-test-containers | xargs -r podman rm -f -v >/dev/null 2>&1 || true
podman pod ls -q --filter name=siwa- | xargs -r podman pod rm -f >/dev/null 2>&1 || true
podman volume rm -f siwa-erasures siwa-test-erasures >/dev/null 2>&1 || true

# ------------------------------------------------------------- images ---
if ! podman image exists "$base"; then
    mirror=$(sed -n 's/^URIs: //p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
    echo "making $base with debootstrap from ${mirror:-deb.debian.org} (about a minute)"
    debootstrap --variant=minbase bookworm "$work/rootfs" "${mirror:-http://deb.debian.org/debian}" >"$work/debootstrap.log" 2>&1 \
        || { tail -20 "$work/debootstrap.log"; exit 1; }
    tar -C "$work/rootfs" -c . | podman import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$base" >/dev/null
    rm -rf "$work/rootfs"
fi
build_args=(BINARIES=prebuilt CONTAINER_ENGINE=podman IMAGE_BUILD_ARGS="--network host --build-arg BASE=$base")
check "the runtime image builds from the host's binaries (make image BINARIES=prebuilt)" \
    make --no-print-directory image "${build_args[@]}" IMAGE="$image"
check "the simulator image builds (make image-simulator)" \
    make --no-print-directory image-simulator "${build_args[@]}" SIMULATOR_IMAGE="$simulator_image"
echo "     image sizes: $image $(podman image inspect "$image" --format '{{.Size}}' | awk '{printf "%.0f MB", $1 / 1e6}')" \
     "(base $(podman image inspect "$base" --format '{{.Size}}' | awk '{printf "%.0f MB", $1 / 1e6}'));" \
     "$simulator_image $(podman image inspect "$simulator_image" --format '{{.Size}}' | awk '{printf "%.0f MB", $1 / 1e6}')"
image_ok() {
    [[ $(podman image inspect "$image" --format '{{.Config.User}}') == 10001:10001 ]] || { echo "user: not 10001"; return 1; }
    podman image inspect "$image" --format '{{json .Config.Entrypoint}} {{json .Config.Cmd}}' | grep -qx '\["/usr/local/bin/siwa"\] \["serve"\]' \
        || { echo "entrypoint/cmd: $(podman image inspect "$image" --format '{{json .Config.Entrypoint}} {{json .Config.Cmd}}')"; return 1; }
    podman image inspect "$image" --format '{{json .Config.Volumes}}' | grep -q '/var/lib/siwa' || { echo "no /var/lib/siwa volume"; return 1; }
    podman image inspect "$image" --format '{{json .Config.Env}}' | grep -q 'SIWA_HTTP_HOST=0.0.0.0' || { echo "listeners not on 0.0.0.0"; return 1; }
    ! podman run --rm --entrypoint /bin/sh "$image" -c 'ls /usr/local/bin' | grep -q siwa-demo || { echo "siwa-demo is in the production image"; return 1; }
    podman run --rm "$image" migrate --help >/dev/null
}
check "the runtime image: uid 10001, siwa serve by default, /var/lib/siwa a volume, no simulator inside" image_ok

# ---------------------------------------------------- the image, run ---
# The simulator plays Apple for the image test and the Kubernetes one.
keys=$work/keys
mkdir -p "$keys" && chown 10001:10001 "$keys" && chmod 0700 "$keys"
apple_port=$(free_port) http_port=$(free_port) api_port=$(free_port) metrics_port=$(free_port) worker_port=$(free_port)
apple=http://127.0.0.1:$apple_port
podman run -d --name siwa-test-simulator --label "$label" --network host -v "$keys:/var/lib/siwa/keys" \
    --entrypoint /usr/local/bin/siwa-demo "$simulator_image" simulator --listen "127.0.0.1:$apple_port" \
    --keys-dir /var/lib/siwa/keys --notify-url "http://127.0.0.1:$http_port/apple/notifications" >/dev/null
check "the simulator container answers Apple's key set" eventually 30 curl -fsS "$apple/auth/keys"
podman run --rm -v "$keys:/var/lib/siwa/keys" --entrypoint /bin/sh "$image" \
    -c 'umask 077; siwa tokens keygen > /var/lib/siwa/keys/token-keys'

admin "DROP DATABASE IF EXISTS siwa_image WITH (FORCE)" && admin "CREATE DATABASE siwa_image"
db=${server_url%/*}/siwa_image
role_url() { sed "s|//[^@]*@|//$1:$1@|" <<<"$db"; }
# Secrets from files, as on systemd and in Kubernetes (SIWA_X_FILE).
secrets=$work/secrets
mkdir -p "$secrets"
printf '%s\n' "$db" >"$secrets/migrate.database-url"
role_url siwa_serve >"$secrets/serve.database-url"
role_url siwa_worker >"$secrets/worker.database-url"
chown -R 10001:10001 "$secrets" && chmod 0400 "$secrets"/*
sign_in=(-e SIWA_APPLE_CLIENT_IDS=$client_id -e SIWA_APPLE_TEAM_ID=DEMOTEAM01 -e SIWA_APPLE_KEY_ID=DEMOKEY001
         -e SIWA_APPLE_PRIVATE_KEY_FILE=/var/lib/siwa/keys/AuthKey_DEMOKEY001.p8
         -e SIWA_TOKEN_ENCRYPTION_KEYS_FILE=/var/lib/siwa/keys/token-keys
         -e SIWA_APPLE_BASE_URL=$apple -e SIWA_APPLE_JWKS_URL=$apple/auth/keys -e SIWA_LOG_LEVEL=notice)
check "siwa migrate runs as a container" podman run --rm --label "$label" --network host -v "$secrets:/run/secrets/siwa:ro" \
    -e SIWA_DATABASE_URL_FILE=/run/secrets/siwa/migrate.database-url "$image" migrate
podman run -d --name siwa-test-serve --label "$label" --network host --read-only --cap-drop all --security-opt no-new-privileges \
    -v "$secrets:/run/secrets/siwa:ro" -v "$keys:/var/lib/siwa/keys:ro" "${sign_in[@]}" \
    -e SIWA_DATABASE_URL_FILE=/run/secrets/siwa/serve.database-url -e SIWA_HTTP_PORT="$http_port" -e SIWA_API_HTTP_PORT="$api_port" \
    -e SIWA_METRICS_HTTP_PORT="$metrics_port" -e SIWA_ADMIN_HTTP_PORT=off "$image" >/dev/null
podman volume create --label "$label" siwa-test-erasures >/dev/null
podman run -d --name siwa-test-worker --label "$label" --network host --read-only --cap-drop all --security-opt no-new-privileges \
    -v "$secrets:/run/secrets/siwa:ro" -v "$keys:/var/lib/siwa/keys:ro" -v siwa-test-erasures:/var/lib/siwa/erasures "${sign_in[@]}" \
    -e SIWA_DATABASE_URL_FILE=/run/secrets/siwa/worker.database-url -e SIWA_WORKER_METRICS_PORT="$worker_port" "$image" worker >/dev/null
if eventually 60 curl -fsS "http://127.0.0.1:$metrics_port/readyz"; then pass "siwa serve's container is ready (/readyz)"
else fail "siwa serve's container is ready (/readyz)" "$(logs siwa-test-serve)"; fi
if eventually 60 curl -fsS "http://127.0.0.1:$worker_port/readyz"; then pass "siwa worker's container is ready (/readyz)"
else fail "siwa worker's container is ready (/readyz)" "$(logs siwa-test-worker)"; fi
check "the HEALTHCHECK finds serve healthy" podman healthcheck run siwa-test-serve
check "the HEALTHCHECK finds the worker healthy" podman healthcheck run siwa-test-worker

key=$(podman run --rm --network host -e SIWA_DATABASE_URL="$db" -e SIWA_LOG_LEVEL=warning "$image" api-keys create image-test 2>/dev/null | tail -n1 || true)
api=http://127.0.0.1:$api_port
# sign_in_user SUB: the app's sign-in, through the simulator, to siwa's /v1.
sign_in_user() {
    curl -fsS -X POST "$apple/simulator/authorize?sub=$1&client_id=$client_id&email=$1@privaterelay.appleid.com" >"$work/apple.json" &&
        curl -fsS -H "Authorization: Bearer $key" -H 'Content-Type: application/json' -d @"$work/apple.json" "$api/v1/sign-in"
}
check "a sign-in through the serve container (the code exchanged at the simulator)" sign_in_user 001.image.0001
check "a second user signs in" sign_in_user 001.image.0002
# notify TYPE SUB: Apple's notification, from the simulator to serve; prints siwa's status.
notify() { curl -fsS -X POST "$apple/simulator/notify?type=$1&sub=$2&client_id=$client_id&email=$2@privaterelay.appleid.com&is_private_email=true" | json status; }
statuses=""
for event in email-disabled:001.image.0001 email-enabled:001.image.0001 consent-revoked:001.image.0002 account-delete:001.image.0001; do
    statuses+="$(notify "${event%%:*}" "${event#*:}") "
done
if [[ $statuses == "200 200 200 200 " ]]; then pass "one notification of each type: four 200s"
else fail "one notification of each type: four 200s" "statuses: $statuses; $(logs siwa-test-serve)"; fi
purged() { curl -fsS -H "Authorization: Bearer $key" "$api/v1/users/$1" | json purge.state | grep -qx completed; }
if eventually 60 purged 001.image.0001; then pass "the worker container completed the account-delete purge"
else fail "the worker container completed the account-delete purge" "$(curl -sS -H "Authorization: Bearer $key" "$api/v1/users/001.image.0001"; logs siwa-test-worker)"; fi
ledger_line() {
    podman run --rm -v siwa-test-erasures:/erasures:ro --entrypoint /bin/sh "$image" -c 'cat /erasures/*' | grep -q '001.image.0001'
}
if eventually 30 ledger_line; then pass "its erasure ledger line is in the worker's volume"
else fail "its erasure ledger line is in the worker's volume" "$(podman run --rm -v siwa-test-erasures:/erasures:ro --entrypoint /bin/ls "$image" -la /erasures)"; fi
stopped_cleanly() { [[ $(podman stop -t 30 siwa-test-serve siwa-test-worker >/dev/null; podman inspect siwa-test-serve siwa-test-worker --format '{{.State.ExitCode}}' | sort -u) == 0 ]]; }
check "serve and worker stop on SIGTERM with exit status 0" stopped_cleanly

# ------------------------------------------------ deploy/compose.yaml ---
if ! podman image exists "$postgres_image"; then
    check "the tests' PostgreSQL image builds (Debian's postgresql-15)" \
        podman build --network host --build-arg BASE="$base" -t "$postgres_image" scripts/containers/postgres
fi
printf 'IMAGE=%s\nSIMULATOR_IMAGE=%s\nPOSTGRES_IMAGE=%s\n' "$image" "$simulator_image" "$postgres_image" >"$work/compose.env"
compose() { (set -a; . "$work/compose.env"; podman-compose -p siwa-test -f deploy/compose.yaml "$@"); }
taken=$(for port in 8080 8082 8083 8090; do python3 -c 'import socket,sys; s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1])))' "$port" 2>/dev/null || echo "$port"; done)
if [[ -n $taken ]]; then
    fail "deploy/compose.yaml: its ports are free on 127.0.0.1" "taken: $taken"
else
    check "docker compose up (podman-compose) starts postgres, migrate, serve, worker and the simulator" compose up -d
    SIWA=http://127.0.0.1:8082 APPLE=http://127.0.0.1:8090
    if eventually 120 curl -fsS http://127.0.0.1:8083/readyz; then pass "compose: serve is ready"
    else fail "compose: serve is ready" "$(logs siwa-test_serve_1)"; fi
    # `run` gives the command a terminal: its lines end in \r\n.
    KEY=$(compose run --rm migrate api-keys create try-backend 2>/dev/null | tr -d '\r' | grep '^siwa_' | tail -n1 || true)
    [[ -n $KEY ]] && pass "compose: run --rm migrate api-keys create prints a key" \
        || fail "compose: run --rm migrate api-keys create prints a key" "$(compose run --rm migrate api-keys create try-backend2 2>&1)"
    # The README's curl session, as it is written there.
    readme_session() {
        curl -s -X POST "$APPLE/simulator/authorize?sub=001.curl.0001&client_id=com.example.siwa.demo&email=me@privaterelay.appleid.com" > "$work/apple.json"
        curl -s -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d @"$work/apple.json" "$SIWA/v1/sign-in" | json is_new_user | grep -qx True || return 1
        curl -s -H "Authorization: Bearer $KEY" "$SIWA/v1/users/001.curl.0001" | json email | grep -qx me@privaterelay.appleid.com || return 1
        curl -s -X DELETE -H "Authorization: Bearer $KEY" "$SIWA/v1/users/001.curl.0001" | json status | grep -qx deletion_scheduled
    }
    check "compose: the README's sign-in, look-up and deletion" readme_session
    erased() { curl -s -H "Authorization: Bearer $KEY" "$SIWA/v1/users/001.curl.0001" >"$work/user.json"
               json purge.state <"$work/user.json" | grep -qx completed && [[ -z $(json email <"$work/user.json") ]]; }
    if eventually 60 erased; then pass "compose: the worker purged the user (purge completed, email null)"
    else fail "compose: the worker purged the user (purge completed, email null)" "$(cat "$work/user.json"; logs siwa-test_worker_1)"; fi
    check "compose: down -v removes it" compose down -v
fi

# ------------------------------------------------ deploy/kubernetes/ ---
# serve's and the worker's Deployments, played against the test cluster
# (host network, so serve's ports come from the test's settings); the
# simulator from above plays Apple again, now for these pods.
admin "DROP DATABASE IF EXISTS siwa_kube WITH (FORCE)" && admin "CREATE DATABASE siwa_kube"
db=${server_url%/*}/siwa_kube
check "kube: siwa migrate (the Job's command) as a container" \
    podman run --rm --label "$label" --network host -e SIWA_DATABASE_URL="$db" "$image" migrate
podman rm -f siwa-test-simulator >/dev/null
apple_port=$(free_port) http_port=$(free_port) api_port=$(free_port) metrics_port=$(free_port) worker_port=$(free_port)
apple=http://127.0.0.1:$apple_port api=http://127.0.0.1:$api_port
podman run -d --name siwa-test-simulator --label "$label" --network host -v "$keys:/var/lib/siwa/keys" \
    --entrypoint /usr/local/bin/siwa-demo "$simulator_image" simulator --listen "127.0.0.1:$apple_port" \
    --keys-dir /var/lib/siwa/keys --notify-url "http://127.0.0.1:$http_port/apple/notifications" >/dev/null
eventually 30 curl -fsS "$apple/auth/keys" || fail "kube: the simulator restarts" "$(logs siwa-test-simulator)"
settings=$(python3 -c 'import json,sys; print(json.dumps(dict(a.split("=", 1) for a in sys.argv[1:])))' \
    SIWA_APPLE_CLIENT_IDS=$client_id SIWA_APPLE_TEAM_ID=DEMOTEAM01 SIWA_APPLE_KEY_ID=DEMOKEY001 SIWA_LOG_FORMAT=json \
    SIWA_APPLE_BASE_URL="$apple" SIWA_APPLE_JWKS_URL="$apple/auth/keys" SIWA_HTTP_PORT="$http_port" SIWA_API_HTTP_PORT="$api_port" \
    SIWA_METRICS_HTTP_PORT="$metrics_port" SIWA_WORKER_METRICS_PORT="$worker_port" SIWA_ADMIN_HTTP_PORT=off)
for pod in serve worker; do
    mkdir -p "$work/kube-secrets/siwa-$pod"
    cp "$keys/AuthKey_DEMOKEY001.p8" "$work/kube-secrets/siwa-$pod/apple-key.p8"
    cp "$keys/token-keys" "$work/kube-secrets/siwa-$pod/token-keys"
    role_url "siwa_$pod" >"$work/kube-secrets/siwa-$pod/database-url"
done
chown -R 10001:10001 "$work/kube-secrets" && chmod 0440 "$work"/kube-secrets/*/*
python3 scripts/containers/kube-play.py "$image" "$settings" "$work/kube-secrets" >"$work/kube.yaml"
# `command`: kube play under the stderr filter above loses the script.
check "kube: podman kube play runs serve's and the worker's Deployments" command podman kube play --network host "$work/kube.yaml"
kube_serve=$(podman ps --format '{{.Names}}' | grep -m1 'siwa-serve.*-serve$' || true)
kube_worker=$(podman ps --format '{{.Names}}' | grep -m1 'siwa-worker.*-worker$' || true)
if eventually 60 curl -fsS "http://127.0.0.1:$metrics_port/readyz"; then pass "kube: serve's pod is ready (its readiness probe's /readyz)"
else fail "kube: serve's pod is ready (its readiness probe's /readyz)" "$(podman ps -a; [[ -n $kube_serve ]] && logs "$kube_serve")"; fi
if eventually 60 curl -fsS "http://127.0.0.1:$worker_port/healthz"; then pass "kube: the worker's pod is live (its liveness probe's /healthz)"
else fail "kube: the worker's pod is live (its liveness probe's /healthz)" "$([[ -n $kube_worker ]] && logs "$kube_worker")"; fi
key=$(podman run --rm --network host -e SIWA_DATABASE_URL="$db" -e SIWA_LOG_LEVEL=warning "$image" api-keys create kube-test 2>/dev/null | tail -n1 || true)
check "kube: a sign-in through serve's pod" sign_in_user 001.kube.0001
status=$(notify account-delete 001.kube.0001)
[[ $status == 200 ]] && pass "kube: an account-delete notification through serve's pod: 200" \
    || fail "kube: an account-delete notification through serve's pod: 200" "status: $status"
if eventually 60 purged 001.kube.0001; then pass "kube: the worker's pod completed the purge"
else fail "kube: the worker's pod completed the purge" "$([[ -n $kube_worker ]] && logs "$kube_worker")"; fi
read_only() { [[ -n $kube_serve ]] && ! podman exec "$kube_serve" /bin/sh -c 'touch /usr/local/bin/x' 2>/dev/null \
              && [[ $(podman exec "$kube_serve" /bin/sh -c 'id -u') == 10001 ]]; }
check "kube: serve's pod runs as uid 10001 on a read-only root" read_only
check "kube: podman kube down" podman kube down "$work/kube.yaml"
rm -f "$work/kube.yaml"

echo "containers: $passed passed, $failed failed"
((failed == 0))
