#!/usr/bin/env bash
# Builds {{name}} into dist/{{name}}.wasm with clang and wasi-libc (after its
# native tests), checks it with `nodestatus plugin check` and runs it once
# with --strict: {{repo}}/scripts/guests/new-setter.sh does it for every language.
set -euo pipefail
NODESTATUS="${NODESTATUS:-{{nodestatus}}}" exec "{{repo}}/scripts/guests/new-setter.sh" c "$(cd "$(dirname "$0")" && pwd)" "{{name}}"
