#!/usr/bin/env bash
# What a rollout restart costs one node in plugin loading: a new pod's
# `nodestatus` loading its plugins with the precompile cache it had (the
# DaemonSet's hostPath, warm) against an empty one (an emptyDir, cold).
#
#   scripts/bench-rollout.sh [NODESTATUS_BIN] [RUNS]
#
# The plugins: the eleven default setters (target/wasm-plugins) and the
# Python, JavaScript and C examples (target/guest-plugins), as scripts/test.sh
# builds them. Each run is `nodestatus once`, which waits for every load and
# prints how long it took and which plugins it compiled; `run` does not wait
# (the node registers at once), so the figure is how long after the start
# every plugin is active.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-${CARGO_TARGET_DIR:-target}/debug/nodestatus}"
runs="${2:-3}"
target="${CARGO_TARGET_DIR:-target}"
wasm="$target/wasm-plugins/wasm32-wasip2/release"
guests="${NODESTATUS_GUEST_PLUGINS:-$target/guest-plugins}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/plugins"
for p in node-address machine-info version-info daemon-endpoints images os-arch \
  memory-pressure disk-pressure pid-pressure volumes ready; do
  f="$wasm/${p//-/_}.wasm"
  [ -f "$f" ] || f="$wasm/$p.wasm"
  cp "$f" "$work/plugins/$p.wasm"
done
for g in cpu-features load-average memory-features; do
  cp "$guests/$g.wasm" "$work/plugins/$g.wasm"
done
once() {
  local start end
  start=$(date +%s.%N)
  "$bin" --log-format text once --plugin-dir "$work/plugins" --cache-dir "$1" \
    2>"$work/err" >/dev/null
  end=$(date +%s.%N)
  printf '%s: %.2f s wall; %s\n' "$2" "$(echo "$end - $start" | bc)" \
    "$(grep -m1 '^loaded ' "$work/err")"
}
for i in $(seq "$runs"); do
  rm -rf "$work/cache"
  once "$work/cache" "cold (empty cache), run $i"
  once "$work/cache" "warm (the same cache), run $i"
done
