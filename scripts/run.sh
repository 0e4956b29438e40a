#!/usr/bin/env bash
# The main job on a fresh machine: build nodestatus and its default setters,
# and run it. With no --kubeconfig (and no $KUBECONFIG), `nodestatus run`
# starts a local etcd and kube-apiserver (built once from Debian's source
# package and cached in ~/.cache/nodestatus) and registers this machine.
# Extra arguments go to `nodestatus run`.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '== %s\n' "$*" >&2; }

log "rust target wasm32-wasip2"
rustup target add wasm32-wasip2
if [ -z "${KUBECONFIG:-}" ] && ! printf '%s\n' "$@" | grep -q -- '--kubeconfig'; then
  log "kube-apiserver and etcd for the embedded default (first run: about 12 minutes)"
  NODESTATUS_APISERVER="$(scripts/ensure-apiserver.sh | tail -n 1)"
  export NODESTATUS_APISERVER
fi
log "building nodestatus (release)"
cargo build --release -p nodestatus
log "building the default setters"
plugins="$(scripts/build-plugins.sh target/default-plugins | tail -n 1)"
config=()
[ -f deploy/default-config.yaml ] && config=(--config deploy/default-config.yaml)
log "starting: nodestatus run --plugin-dir $plugins ${config[*]} $*"
exec target/release/nodestatus run --plugin-dir "$plugins" "${config[@]}" "$@"
