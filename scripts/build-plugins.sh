#!/usr/bin/env bash
# Builds the setters in plugins/ for wasm32-wasip2 and copies the default set
# (the kubelet's setters, in its order, ready, and features: NFD's labels)
# into a directory,
# by write-then-rename so that a running engine never sees half a file.
#
#   scripts/build-plugins.sh [DEST]   (default: target/default-plugins)
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${1:-target/default-plugins}"
rustup target add wasm32-wasip2 >/dev/null 2>&1 || rustup target add wasm32-wasip2
cargo build --release --target wasm32-wasip2 --manifest-path plugins/Cargo.toml >&2
built=plugins/target/wasm32-wasip2/release
mkdir -p "$dest"
for name in node_address machine_info version_info daemon_endpoints images os_arch \
            memory_pressure disk_pressure pid_pressure volumes ready features; do
  src="$built/$name.wasm"
  [ -f "$src" ] || continue
  cp "$src" "$dest/.$name.wasm.tmp" && mv "$dest/.$name.wasm.tmp" "$dest/${name//_/-}.wasm"
done
echo "$dest"
