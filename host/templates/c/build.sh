#!/usr/bin/env bash
# Builds {{name}} into dist/{{name}}.wasm with clang and wasi-libc (after its
# native tests), checks it with `nodestatus plugin check` and runs it once
# with --strict.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
nodestatus="${NODESTATUS:-{{nodestatus}}}"
NODESTATUS_PLUGIN_DIRS="$here" "{{repo}}/scripts/guests/c.sh" "$here/dist" >/dev/null
"$nodestatus" plugin check "$here/dist/{{name}}.wasm"
"$nodestatus" once --plugin "$here/dist/{{name}}.wasm" --strict --output diff
