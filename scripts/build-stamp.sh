#!/usr/bin/env bash
# Writes the commit siwa is built from into the build stamp's header,
# Sources/SIWABuildStamp/generated/commit.h (not in git), and leaves the file
# alone when it already says so: the header changes only when the commit
# does, and then only BuildStamp.c is recompiled (its dependency file names
# the header) before the binaries relink. `make` runs this before every
# swift build; see Package.swift.
#
#   scripts/build-stamp.sh COMMIT      (empty: "unknown")
set -euo pipefail
cd "$(dirname "$0")/.."

dir=Sources/SIWABuildStamp/generated
header=$dir/commit.h
# What a C string literal and a Prometheus label carry without escaping.
commit=$(printf '%s' "${1:-}" | LC_ALL=C tr -cd 'A-Za-z0-9.+-' | cut -c1-64)
commit=${commit:-unknown}

mkdir -p "$dir"
tmp=$(mktemp "$dir/.commit.h.XXXXXX")
trap 'rm -f "$tmp"' EXIT
printf '// Written by scripts/build-stamp.sh (make); not in git.\n#define SIWA_GIT_COMMIT "%s"\n' "$commit" >"$tmp"
cmp -s "$tmp" "$header" && exit 0

existed=false
[[ -e $header ]] && existed=true
chmod 0644 "$tmp"
mv "$tmp" "$header"
# A header that did not exist when BuildStamp.c was last compiled (a bare
# swift build first) is not in its dependency file, so its arrival alone
# would not recompile it.
$existed || touch Sources/SIWABuildStamp/BuildStamp.c
echo "build stamp: commit $commit ($header)"
