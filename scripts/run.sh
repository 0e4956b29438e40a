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
# What is built, and when: target/release/nodestatus only when it is missing
# or older than one of its sources (scripts/install.sh --build: the rule is
# there; no cargo, so no wait on another build's lock, when it is current);
# the control plane only the first time (scripts/ensure-apiserver.sh); the
# default setters with cargo (seconds when current), unless you give your
# own --plugin-dir.
#
# NODESTATUS_RUN_PRINT_ARGS=1 prints the arguments `nodestatus run` would get,
# one a line, and on stderr what would be built, and exits before building
# anything. NODESTATUS_BIN=PATH runs that nodestatus binary instead of the
# release build (with your --plugin-dir, nothing is built: the new-user test
# in tests/all runs it so); `NODESTATUS_BIN=nodestatus` runs the one on your
# PATH (scripts/install.sh puts it there).
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '== %s\n' "$*" >&2; }
# Builds read /dev/null; a sandbox may have a plain file there.
scripts/ensure-devnull.sh

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
embedded=false
[ -n "${KUBECONFIG:-}" ] || printf '%s\n' "$@" | grep -q -- '--kubeconfig' || embedded=true
k8s_version="${NODESTATUS_K8S_VERSION:-1.37.2}"
k8s_bin="${NODESTATUS_CACHE:-$HOME/.cache/nodestatus}/k8s-$k8s_version/bin"
# What will be built, and what not (the dry run prints it too). The
# binary's line comes from scripts/install.sh (--check in the dry run,
# --build in a real run).
plan() {
  if [ -n "${NODESTATUS_BIN:-}" ]; then
    log "nodestatus: $NODESTATUS_BIN (NODESTATUS_BIN): no build"
  elif [ "${1:-}" = dry ]; then
    log "nodestatus: $(scripts/install.sh --check || true)"
  fi
  if ! $embedded; then
    log "control plane: none (a kubeconfig is given)"
  elif [ -f "$k8s_bin/.build-recipe" ]; then
    log "control plane: Kubernetes $k8s_version, cached in $k8s_bin"
  else
    log "control plane: Kubernetes $k8s_version is not built yet: the first run builds it from its Go modules (about 20 minutes on 2 cores), then it is cached in $k8s_bin"
  fi
  if $user_plugins; then
    log "setters: your --plugin-dir (no build)"
  else
    log "setters: the default ones, built into target/default-plugins (cargo; seconds when current)"
  fi
}
if [ -n "${NODESTATUS_RUN_PRINT_ARGS:-}" ]; then
  plan dry
  plugins=()
  $user_plugins || plugins=(--plugin-dir '<the default setters>')
  printf '%s\n' run ${plugins[@]+"${plugins[@]}"} ${config[@]+"${config[@]}"} "$@"
  exit 0
fi

plan
if ! $user_plugins; then
  rustup target add wasm32-wasip2 >/dev/null 2>&1 || rustup target add wasm32-wasip2
fi
if $embedded; then
  NODESTATUS_APISERVER="$(scripts/ensure-apiserver.sh | tail -n 1)"
  export NODESTATUS_APISERVER
  # The kubectl of the same build, for the command the engine prints.
  PATH="$(dirname "$NODESTATUS_APISERVER"):$PATH"
  export PATH
  # Another kubectl on the user's PATH may be outside the skew policy
  # (1.36 to 1.38): say which one to use, in the user's own shell.
  log "kubectl for this cluster: $(dirname "$NODESTATUS_APISERVER")/kubectl (Kubernetes $k8s_version); in your shell: export PATH=\"$(dirname "$NODESTATUS_APISERVER"):\$PATH\""
fi
# Built only when older than its sources; protoc is installed for a build.
nodestatus="${NODESTATUS_BIN:-$(scripts/install.sh --build | tail -n 1)}"
plugins=()
if ! $user_plugins; then
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
  log "check an edit as this run takes it: nodestatus config check $config_file ${plugins[*]}"
fi
log "starting: nodestatus run ${plugins[*]} ${config[*]} $*"
exec "$nodestatus" run ${plugins[@]+"${plugins[@]}"} ${config[@]+"${config[@]}"} "$@"
