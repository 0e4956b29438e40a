#!/usr/bin/env bash
# Builds the WIT 0.1 components that the compatibility test runs beside 0.2
# ones (tests/all/compat.rs), from this repository's history, and writes
# them to tests/fixtures/wit-0.1/. The files are committed: the test needs
# no old toolchain. Run it again only to remake them.
#
#   kernel-check.wasm  nodestatus:plugin@0.1.0, plugins/kernel-check at 4d38082
#                      (the last commit before WIT 0.1.1)
#   os-arch.wasm       nodestatus:plugin@0.1.1, plugins/os-arch at f32729a
#                      (the last commit before WIT 0.2.0)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/tests/fixtures/wit-0.1
work=${TMPDIR:-/tmp}/nodestatus-compat-fixtures
mkdir -p "$out" "$work"
build() { # commit plugin
  local tree=$work/$1
  [ -d "$tree" ] || git -C "$root" worktree add --detach "$tree" "$1" >/dev/null
  (cd "$tree/plugins" && CARGO_TARGET_DIR=$work/target cargo build --offline --release \
     --target wasm32-wasip2 -p "$2")
  cp "$work/target/wasm32-wasip2/release/${2//-/_}.wasm" "$out/$2.wasm"
}
build 4d38082 kernel-check
build f32729a os-arch
for c in 4d38082 f32729a; do git -C "$root" worktree remove --force "$work/$c"; done
ls -l "$out"
