#!/usr/bin/env bash
# Runs every test of nodestatus on a fresh machine: installs what is missing
# (the wasm32-wasip2 target, etcd and a kube-apiserver built from Debian's
# source package, componentize-py, componentize-js, clang with wasi-libc,
# wit-bindgen-cli and wasm-tools; all cached in ~/.cache/nodestatus), builds
# the Python, JavaScript and C setters from source, then runs the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '\n== %s\n' "$*" >&2; }

log "rust target wasm32-wasip2"
rustup target add wasm32-wasip2

log "kube-apiserver and etcd (built once, cached outside the checkout)"
NODESTATUS_APISERVER="$(scripts/ensure-apiserver.sh | tail -n 1)"
export NODESTATUS_APISERVER

log "setters in Python, JavaScript and C: toolchains (cached in ~/.cache/nodestatus/toolchains), their unit tests, and builds into target/guest-plugins"
scripts/guests/python.sh target/guest-plugins
scripts/guests/js.sh target/guest-plugins
scripts/guests/c.sh target/guest-plugins

log "cargo test (builds plugins/ for wasm32-wasip2 on the way)"
cargo test --workspace --no-fail-fast "$@"

log "plugin unit tests (the setters compiled natively, on fixture trees)"
cargo test --manifest-path plugins/Cargo.toml --workspace "$@"
