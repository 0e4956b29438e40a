#!/usr/bin/env bash
# Builds {{name}} into dist/{{name}}.wasm with componentize-py (after its unit
# tests), checks it with `nodestatus plugin check` and runs it once with --strict
# under the grant in config.yaml. The SDK and the build scripts are in
# {{repo}}; `nodestatus kit` writes them there again if it was removed.
set -euo pipefail
nodestatus="${NODESTATUS:-{{nodestatus}}}"
"$nodestatus" kit "{{repo}}" >/dev/null
NODESTATUS="$nodestatus" exec "{{repo}}/scripts/guests/new-setter.sh" python "$(cd "$(dirname "$0")" && pwd)" "{{name}}"
