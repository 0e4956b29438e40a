#!/usr/bin/env bash
# Builds {{name}} into dist/{{name}}.wasm with componentize-js (after its unit
# tests), checks it with `nodestatus plugin check` and runs it once with --strict:
# {{repo}}/scripts/guests/new-setter.sh does it for every language.
set -euo pipefail
NODESTATUS="${NODESTATUS:-{{nodestatus}}}" exec "{{repo}}/scripts/guests/new-setter.sh" js "$(cd "$(dirname "$0")" && pwd)" "{{name}}"
