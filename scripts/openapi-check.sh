#!/usr/bin/env bash
# scripts/openapi-check.py with a Python that has yaml and jsonschema
# (Debian's python3-yaml and python3-jsonschema; `make check-openapi`
# installs them when run as root): python3 on PATH if it has both, else
# the system's /usr/bin/python3. Exit 127 and say so when neither has them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
for python in python3 /usr/bin/python3; do
    if command -v "$python" >/dev/null 2>&1 && "$python" -c 'import yaml, jsonschema' >/dev/null 2>&1; then
        exec "$python" "$here/openapi-check.py" "$@"
    fi
done
echo "error: no python3 with yaml and jsonschema (apt-get install python3-yaml python3-jsonschema)" >&2
exit 127
