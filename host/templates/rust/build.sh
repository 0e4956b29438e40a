#!/usr/bin/env bash
# Builds {{name}} into dist/{{name}}.wasm, runs its tests natively, checks
# it with `nodestatus plugin check` and runs it once with --strict.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
nodestatus="${NODESTATUS:-{{nodestatus}}}"
rustup target add wasm32-wasip2 >/dev/null 2>&1 || true
cargo test --manifest-path "$here/Cargo.toml"
cargo build --release --target wasm32-wasip2 --manifest-path "$here/Cargo.toml"
target="${CARGO_TARGET_DIR:-$here/target}"
mkdir -p "$here/dist"
cp "$target/wasm32-wasip2/release/$(echo "{{name}}" | tr - _).wasm" "$here/dist/{{name}}.wasm"
"$nodestatus" plugin check "$here/dist/{{name}}.wasm"
"$nodestatus" once --plugin "$here/dist/{{name}}.wasm" --strict --output diff
