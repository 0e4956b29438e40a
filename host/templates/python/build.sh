#!/usr/bin/env bash
# Builds {{name}} into dist/{{name}}.wasm with componentize-py (after its unit
# tests), checks it with `nodestatus plugin check` and runs it once with --strict:
# {{repo}}/scripts/guests/new-setter.sh does it for every language.
set -euo pipefail
NODESTATUS="${NODESTATUS:-{{nodestatus}}}" exec "{{repo}}/scripts/guests/new-setter.sh" python "$(cd "$(dirname "$0")" && pwd)" "{{name}}"
