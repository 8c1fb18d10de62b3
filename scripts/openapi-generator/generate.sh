#!/usr/bin/env bash
# make generate-client: SIWAClient's types and calls from docs/openapi.yaml,
# by swift-openapi-generator built here (its own scratch path,
# .build-generator), written to Sources/SIWAClient/Generated and committed;
# then the checksums OpenAPIClientTests compares (generated-from.sha256), so a
# document changed without regenerating, or generated code edited by hand,
# fails the suite.
#
# The document is tolerant (no `additionalProperties: false`, which would
# make generated decoders refuse an unknown field: an app's backend must keep
# working when a newer siwa adds a field to an answer); the contract check
# adds the strictness while it validates. The check below keeps it so.
# The client reads a copy without `webhooks`: the generator makes nothing of them
# (SIWAClient's AppEvent is written by hand, decoded leniently for the same
# reason), and its filter (the config's tags) fails on them: it drops the
# components they use, then reports their references as unresolved.
set -euo pipefail
cd "$(dirname "$0")/../.."
scratch=.build-generator
out=Sources/SIWAClient/Generated
swift build --package-path scripts/openapi-generator --scratch-path "$scratch" --product swift-openapi-generator
mkdir -p "$scratch/input" "$out"
awk '/^webhooks:/ { skip = 1; next } /^[a-z]/ { skip = 0 } !skip' docs/openapi.yaml > "$scratch/input/openapi.yaml"
if grep -v '^ *#' "$scratch/input/openapi.yaml" | grep -q 'additionalProperties: false'; then
  echo "generate.sh: docs/openapi.yaml says additionalProperties: false; the published document is tolerant (see its header)" >&2
  exit 1
fi
"$scratch/debug/swift-openapi-generator" generate \
  --config scripts/openapi-generator/openapi-generator-config.yaml \
  --output-directory "$out" \
  "$scratch/input/openapi.yaml"
# The generator writes `public import` (Swift 6.4 silences its unused ones
# with @diagnose, which 6.3 lacks): plain imports, as the rest of the
# target has, so the build stays free of warnings.
sed -i -E 's/^(@_spi\(Generated\) )?public import /\1import /' "$out"/*.swift
sha256sum docs/openapi.yaml scripts/openapi-generator/openapi-generator-config.yaml scripts/openapi-generator/generate.sh \
  "$out"/*.swift > scripts/openapi-generator/generated-from.sha256
echo "generated $out from docs/openapi.yaml; commit both"
