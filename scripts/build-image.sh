#!/usr/bin/env bash
# Builds the engine's container image, nodestatus:0.1.0, with no registry and
# no base image: buildah from scratch (scripts/real-node/oci.sh), committed
# with --timestamp 0, written as a docker-archive tar for
# `ctr -n k8s.io images import` (or `docker load`, `podman load`).
#
#   scripts/build-image.sh [--musl] [--bin PATH] [--wasm DIR] [--out TAR] [--tag TAG]
#
#   --bin PATH  the nodestatus binary (default target/debug/nodestatus, or
#               the musl release build with --musl). It is copied with its
#               debug info stripped (the debug build is about 600 MB, 10x less
#               stripped).
#   --musl      build a static x86_64-unknown-linux-musl release binary first
#               (`rustup target add x86_64-unknown-linux-musl`; about 25
#               minutes on 2 cores) and ship it alone, with no libraries.
#   --wasm DIR  the built plugins (default target/wasm-plugins/wasm32-wasip2/release,
#               what the test build makes; built here if missing)
#   --out TAR   default target/image/nodestatus-0.1.0.tar
#   --tag TAG   default nodestatus:0.1.0 (what deploy/kubernetes/daemonset.yaml runs)
#
# Without --musl the binary links glibc dynamically: the image carries the
# libraries that `ldd` names (libgcc_s, libm, libc and the loader), copied
# from this machine, so it runs on the kubelet's pause-based pod with nothing
# of the host mounted.
#
# The image:
#   /usr/local/bin/nodestatus             entrypoint
#   /usr/lib/nodestatus/plugins/          the default setters (the kubelet's, in
#                                         its order, ready, and features: NFD's
#                                         labels, which runs in companion mode too)
#   /usr/lib/nodestatus/vendor-plugins/   disk, gpu, kernel-check: a vendor's
#                                         setters, for companion mode
#   /etc/nodestatus/config.yaml           deploy/default-config.yaml
#   /etc/ssl/certs/ca-certificates.crt    this machine's CA bundle (the TLS client needs roots)
#   /var/cache/nodestatus                 the precompile cache (a volume in the DaemonSet)
# User 65532 (non-root) by default; the DaemonSet runs it as 0 with every
# capability dropped, to read the kubelet's credential as its owner.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
musl=0
bin=""
wasm="target/wasm-plugins/wasm32-wasip2/release"
out="target/image/nodestatus-0.1.0.tar"
tag="nodestatus:0.1.0"
log() { printf '[build-image] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
while [ $# -gt 0 ]; do
  case "$1" in
    --musl) musl=1 ;;
    --bin) bin="$2"; shift ;;
    --wasm) wasm="$2"; shift ;;
    --out) out="$2"; shift ;;
    --tag) tag="$2"; shift ;;
    *) die "unknown argument $1 (see the header of $0)" ;;
  esac
  shift
done
command -v buildah >/dev/null || die "buildah is missing: scripts/real-node.sh prepare installs it (apt-get install buildah)"

if [ "$musl" = 1 ]; then
  rustup target add x86_64-unknown-linux-musl >&2
  log "building the static musl release binary (about 25 minutes on 2 cores)"
  cargo build --release --target x86_64-unknown-linux-musl -p nodestatus --bin nodestatus >&2
  bin="${bin:-target/x86_64-unknown-linux-musl/release/nodestatus}"
fi
bin="${bin:-target/debug/nodestatus}"
[ -x "$bin" ] || die "no binary at $bin: cargo build -p nodestatus --bin nodestatus"

if [ ! -f "$wasm/disk.wasm" ]; then
  log "building the plugins into target/wasm-plugins"
  CARGO_TARGET_DIR="$root/target/wasm-plugins" \
    cargo build --release --target wasm32-wasip2 --manifest-path plugins/Cargo.toml >&2
fi

t="$(mktemp -d /tmp/nodestatus-image.XXXXXX)"
trap 'rm -rf "$t"' EXIT
rootfs="$t/rootfs"
mkdir -p "$rootfs/usr/local/bin" "$rootfs/usr/lib/nodestatus/plugins" \
  "$rootfs/usr/lib/nodestatus/vendor-plugins" "$rootfs/etc/nodestatus" \
  "$rootfs/var/cache/nodestatus" "$rootfs/tmp"
log "copying $bin without its debug info"
objcopy --strip-debug "$bin" "$rootfs/usr/local/bin/nodestatus"
if [ "$musl" = 0 ]; then
  # Every library the loader resolves, at the same path, and the loader.
  for lib in $(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }'); do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done
elif ldd "$bin" >/dev/null 2>&1; then
  die "$bin is dynamically linked; --musl wants a static binary"
fi
# The default set, named as scripts/build-plugins.sh names it, and the vendor set.
for name in node_address machine_info version_info daemon_endpoints images os_arch \
            memory_pressure disk_pressure pid_pressure volumes ready features; do
  [ -f "$wasm/$name.wasm" ] || die "no $wasm/$name.wasm"
  cp "$wasm/$name.wasm" "$rootfs/usr/lib/nodestatus/plugins/${name//_/-}.wasm"
done
for name in disk gpu kernel_check; do
  [ -f "$wasm/$name.wasm" ] || die "no $wasm/$name.wasm"
  cp "$wasm/$name.wasm" "$rootfs/usr/lib/nodestatus/vendor-plugins/${name//_/-}.wasm"
done
cp deploy/default-config.yaml "$rootfs/etc/nodestatus/config.yaml"
# The client's TLS stack (rustls-platform-verifier) refuses to start with no
# root certificates at all, even for a kubeconfig that names its own CA:
# ship this machine's bundle (Debian's ca-certificates).
[ -f /etc/ssl/certs/ca-certificates.crt ] || die "no /etc/ssl/certs/ca-certificates.crt: apt-get install ca-certificates"
mkdir -p "$rootfs/etc/ssl/certs"
cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
chown 65532:65532 "$rootfs/var/cache/nodestatus"
chmod 1777 "$rootfs/tmp"
# Same tree, same image: fixed modes and times on everything.
find "$rootfs" -exec touch -h -d @0 {} +

# shellcheck source=real-node/oci.sh
. scripts/real-node/oci.sh
mkdir -p "$(dirname "$out")"
log "committing $tag"
oci_image "$rootfs" "$tag" "$out" \
  --entrypoint '["/usr/local/bin/nodestatus"]' \
  --cmd '["run", "--config=/etc/nodestatus/config.yaml", "--plugin-dir=/usr/lib/nodestatus/plugins"]' \
  --user 65532:65532 \
  --env PATH=/usr/local/bin \
  --label org.opencontainers.image.title=nodestatus \
  --label org.opencontainers.image.version=0.1.0
log "$out ($(du -h "$out" | cut -f1))"
echo "$out"
