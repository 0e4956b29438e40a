#!/usr/bin/env bash
# The main job on a fresh machine: build nodestatus and its default setters,
# and run it. With no --kubeconfig (and no $KUBECONFIG), `nodestatus run`
# starts a local etcd and kube-apiserver (built once from Debian's source
# package and cached in ~/.cache/nodestatus) and registers this machine.
# Extra arguments go to `nodestatus run`. The embedded default config (the
# binary's copy of deploy/default-config.yaml) is used unless you give your
# own --config, and the default setters unless you give your own --plugin-dir.
#
# NODESTATUS_RUN_PRINT_ARGS=1 prints the arguments `nodestatus run` would get,
# one a line, and exits before building anything.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '== %s\n' "$*" >&2; }

user_plugins=false
for arg in "$@"; do
  case "$arg" in
    --plugin-dir | --plugin-dir=*) user_plugins=true ;;
  esac
done
if [ -n "${NODESTATUS_RUN_PRINT_ARGS:-}" ]; then
  plugins=()
  $user_plugins || plugins=(--plugin-dir '<the default setters>')
  printf '%s\n' run ${plugins[@]+"${plugins[@]}"} "$@"
  exit 0
fi

log "rust target wasm32-wasip2, and protoc for the CRI client's build"
rustup target add wasm32-wasip2
scripts/ensure-packages.sh protobuf-compiler
if [ -z "${KUBECONFIG:-}" ] && ! printf '%s\n' "$@" | grep -q -- '--kubeconfig'; then
  log "kube-apiserver and etcd for the embedded default (first run: about 12 minutes)"
  NODESTATUS_APISERVER="$(scripts/ensure-apiserver.sh | tail -n 1)"
  export NODESTATUS_APISERVER
fi
log "building nodestatus (release)"
cargo build --release -p nodestatus
plugins=()
if ! $user_plugins; then
  log "building the default setters"
  plugins=(--plugin-dir "$(scripts/build-plugins.sh target/default-plugins | tail -n 1)")
fi
log "starting: nodestatus run ${plugins[*]} $*"
exec target/release/nodestatus run ${plugins[@]+"${plugins[@]}"} "$@"
