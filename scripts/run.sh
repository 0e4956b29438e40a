#!/usr/bin/env bash
# The main job on a fresh machine: build nodestatus and its default setters,
# and run it. With no --kubeconfig (and no $KUBECONFIG), `nodestatus run`
# starts a local etcd, kube-apiserver and kube-controller-manager (Kubernetes
# 1.37.2, built once from their Go modules and cached in ~/.cache/nodestatus)
# and registers this machine.
# Extra arguments go to `nodestatus run`. The default setters are used unless
# you give your own --plugin-dir.
#
# The config: your --config if you give one; else a config file of your own,
# ${NODESTATUS_RUN_CONFIG:-${XDG_CONFIG_HOME:-~/.config}/nodestatus/config.yaml},
# written once from the default config (`nodestatus config default`) and left
# alone after that. The engine reads it again while it runs: to grant a new
# setter a directory, add `plugins.<name>.paths` there and save.
#
# NODESTATUS_RUN_PRINT_ARGS=1 prints the arguments `nodestatus run` would get,
# one a line, and exits before building anything. NODESTATUS_BIN=PATH runs
# that nodestatus binary instead of building one (with your --plugin-dir,
# nothing is built: the new-user test in tests/all runs it so).
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '== %s\n' "$*" >&2; }

user_plugins=false
user_config=false
for arg in "$@"; do
  case "$arg" in
    --plugin-dir | --plugin-dir=*) user_plugins=true ;;
    --config | --config=*) user_config=true ;;
  esac
done
config_file="${NODESTATUS_RUN_CONFIG:-${XDG_CONFIG_HOME:-$HOME/.config}/nodestatus/config.yaml}"
config=()
$user_config || config=(--config "$config_file")
if [ -n "${NODESTATUS_RUN_PRINT_ARGS:-}" ]; then
  plugins=()
  $user_plugins || plugins=(--plugin-dir '<the default setters>')
  printf '%s\n' run ${plugins[@]+"${plugins[@]}"} ${config[@]+"${config[@]}"} "$@"
  exit 0
fi

nodestatus="${NODESTATUS_BIN:-target/release/nodestatus}"
if [ -z "${NODESTATUS_BIN:-}" ] || ! $user_plugins; then
  log "rust target wasm32-wasip2, and protoc for the CRI client's build"
  rustup target add wasm32-wasip2
  scripts/ensure-packages.sh protobuf-compiler
fi
if [ -z "${KUBECONFIG:-}" ] && ! printf '%s\n' "$@" | grep -q -- '--kubeconfig'; then
  log "the embedded control plane (scripts/ensure-apiserver.sh: built once, then cached)"
  NODESTATUS_APISERVER="$(scripts/ensure-apiserver.sh | tail -n 1)"
  export NODESTATUS_APISERVER
  # The kubectl of the same build, for the command the engine prints.
  PATH="$(dirname "$NODESTATUS_APISERVER"):$PATH"
  export PATH
fi
if [ -z "${NODESTATUS_BIN:-}" ]; then
  log "building nodestatus (release)"
  cargo build --release -p nodestatus
fi
plugins=()
if ! $user_plugins; then
  log "building the default setters"
  plugins=(--plugin-dir "$(scripts/build-plugins.sh target/default-plugins | tail -n 1)")
fi
if ! $user_config; then
  if [ ! -e "$config_file" ]; then
    mkdir -p "$(dirname "$config_file")"
    "$nodestatus" config default >"$config_file.tmp"
    mv "$config_file.tmp" "$config_file"
    log "wrote the default config to $config_file"
  fi
  log "config: $config_file (yours to edit; read again while the engine runs: grant a setter a directory under plugins.<name>.paths)"
fi
log "starting: nodestatus run ${plugins[*]} ${config[*]} $*"
exec "$nodestatus" run ${plugins[@]+"${plugins[@]}"} ${config[@]+"${config[@]}"} "$@"
