#!/bin/bash
# The image's HEALTHCHECK: GET /healthz on the listener of what the container
# runs (PID 1): serve's metrics listener, or the worker's. A one-shot
# command (migrate, api-keys, ...) has nothing to check. Bash's /dev/tcp, so
# the image needs no HTTP client; every step has a deadline.
set -u
case " $(tr '\0' ' ' </proc/1/cmdline) " in
  *" worker "*) port=${SIWA_WORKER_METRICS_PORT:-9091} ;;
  *" serve "*) port=${SIWA_METRICS_HTTP_PORT:-8083} ;;
  *) exit 0 ;;
esac
[[ $port == off ]] && exit 0
exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
printf 'GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
IFS= read -r -t 4 status <&3 || exit 1
[[ $status == "HTTP/1."?" 200"* ]]
