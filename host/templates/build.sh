#!/usr/bin/env bash
# Builds {{name}} into dist/{{name}}.wasm {{how}}, checks it
# with `nodestatus plugin check` and runs it once with --strict, both under
# the grant in config.yaml.
#
# The SDK, the WIT and the build scripts are in {{kit}}/, written by
# `nodestatus new` (its VERSION says which): commit them with the setter, and
# it builds here from any directory, on any machine with the toolchain.
# `nodestatus` is the one on PATH, or $NODESTATUS.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
nodestatus="${NODESTATUS:-nodestatus}"
command -v "$nodestatus" >/dev/null || {
  echo "$0: no $nodestatus on PATH: install nodestatus (see its README), or set NODESTATUS=/path/to/nodestatus" >&2
  exit 127
}
NODESTATUS="$nodestatus" exec "$here/{{kit}}/scripts/guests/new-setter.sh" {{lang_id}} "$here" "{{name}}"
