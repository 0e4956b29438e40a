#!/usr/bin/env bash
# Runs every test of nodestatus on a fresh machine: installs what is missing
# (the wasm32-wasip2 target, etcd and the Kubernetes 1.20.2 control plane
# built from Debian's source package, componentize-py, componentize-js, clang
# with wasi-libc, wit-bindgen-cli and wasm-tools; all cached in
# ~/.cache/nodestatus), builds the Python, JavaScript and C setters from
# source, then runs the tests.
#
# The three set-up jobs (the control plane, the guest toolchains and setters,
# and the Rust build of every test binary) are independent and run side by
# side; each writes its log under target/test-logs, printed if it fails.
# Then the tests run: the unit tests, the integration binary (tests/all),
# the fault rig (tests/faults) and the plugins' native tests.
#
# Longer runs, off by default: NODESTATUS_PROPTEST_CASES=3000 (generated
# patches against the real apiserver, 500 by default).
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '\n== %s\n' "$*" >&2; }

log "rust target wasm32-wasip2; Debian packages for the build (protoc) and the tests (containerd)"
rustup target add wasm32-wasip2
scripts/ensure-packages.sh protobuf-compiler containerd

logs=target/test-logs
mkdir -p "$logs"
log "set-up, side by side: control plane, guest setters, Rust build (logs in $logs)"
scripts/ensure-apiserver.sh >"$logs/apiserver.log" 2>&1 &
apiserver=$!
(
  scripts/guests/python.sh target/guest-plugins &&
    scripts/guests/js.sh target/guest-plugins &&
    scripts/guests/c.sh target/guest-plugins
) >"$logs/guests.log" 2>&1 &
guests=$!
cargo test --workspace --no-run >"$logs/build.log" 2>&1 &
build=$!
failed=0
for job in "apiserver:$apiserver" "guests:$guests" "build:$build"; do
  name=${job%%:*}
  if wait "${job#*:}"; then
    log "$name: done"
  else
    log "$name: FAILED; the end of $logs/$name.log:"
    tail -n 60 "$logs/$name.log" >&2
    failed=1
  fi
done
[ "$failed" = 0 ] || exit 1
NODESTATUS_APISERVER="$(tail -n 1 "$logs/apiserver.log")"
export NODESTATUS_APISERVER

log "cargo test (unit, integration, fault rig)"
cargo test --workspace --no-fail-fast "$@"

log "plugin unit tests (the setters compiled natively, on fixture trees)"
cargo test --manifest-path plugins/Cargo.toml --workspace "$@"
