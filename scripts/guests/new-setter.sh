#!/usr/bin/env bash
# Builds one setter directory made by `nodestatus new` (its build.sh calls
# the copy in DIR/nodestatus-kit/scripts/guests): DIR becomes
# DIR/dist/NAME.wasm after its unit tests, is checked with `nodestatus plugin
# check`, and runs once with --strict, printing the diff; both under
# DIR/config.yaml (the grants the setter needs) when there is one.
#
#   scripts/guests/new-setter.sh LANG DIR NAME     (LANG: rust, python, js, c or go)
#
# Rust builds with cargo for wasm32-wasip2 (into $CARGO_TARGET_DIR, or
# DIR/target); Python, JavaScript, C and Go with scripts/guests/<LANG>.sh, which
# runs the tests and installs its toolchain once. $NODESTATUS is the
# nodestatus binary to run (default: nodestatus on PATH).
set -euo pipefail

[ "$#" -eq 3 ] || { echo "usage: $0 rust|python|js|c|go DIR NAME" >&2; exit 2; }
lang=$1 dir=$2 name=$3
guests="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
nodestatus="${NODESTATUS:-nodestatus}"

case "$lang" in
  rust)
    rustup target add wasm32-wasip2 >/dev/null 2>&1 || true
    cargo test --manifest-path "$dir/Cargo.toml"
    cargo build --release --target wasm32-wasip2 --manifest-path "$dir/Cargo.toml"
    mkdir -p "$dir/dist"
    cp "${CARGO_TARGET_DIR:-$dir/target}/wasm32-wasip2/release/${name//-/_}.wasm" "$dir/dist/$name.wasm"
    ;;
  python | js | c | go)
    NODESTATUS_PLUGIN_DIRS="$dir" "$guests/$lang.sh" "$dir/dist" >/dev/null
    ;;
  *)
    echo "$0: unknown language $lang (rust, python, js, c or go)" >&2
    exit 2
    ;;
esac
# The setter's own grants, for the check as for the run: without them the
# check would show the paths it asks for as withheld.
config=()
[ -f "$dir/config.yaml" ] && config=(--config "$dir/config.yaml")
"$nodestatus" plugin check "$dir/dist/$name.wasm" ${config[@]+"${config[@]}"}
"$nodestatus" once --plugin "$dir/dist/$name.wasm" ${config[@]+"${config[@]}"} --strict --output diff
