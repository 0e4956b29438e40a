#!/usr/bin/env bash
# Builds kube-apiserver once from Debian's `kubernetes` source package and
# installs etcd, caching the binary outside the checkout. Idempotent: a cached
# binary is reused. Prints its path on stdout's last line.
#
#   NODESTATUS_CACHE (default ~/.cache/nodestatus) holds bin/ and src/.
set -euo pipefail
cache="${NODESTATUS_CACHE:-$HOME/.cache/nodestatus}"
bin="$cache/bin/kube-apiserver"
log() { printf '[ensure-apiserver] %s\n' "$*" >&2; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

need_pkgs=()
command -v etcd >/dev/null 2>&1 || need_pkgs+=(etcd-server)
command -v openssl >/dev/null 2>&1 || need_pkgs+=(openssl)
command -v kubectl >/dev/null 2>&1 || need_pkgs+=(kubernetes-client)
if [ ! -x "$bin" ]; then
  command -v go >/dev/null 2>&1 || need_pkgs+=(golang-go)
  command -v rsync >/dev/null 2>&1 || need_pkgs+=(rsync)
fi
if [ ${#need_pkgs[@]} -gt 0 ] || { [ ! -x "$bin" ] && ! ls "$cache"/src/kubernetes_*.orig.tar.gz >/dev/null 2>&1; }; then
  src_list=/etc/apt/sources.list.d/nodestatus-deb-src.sources
  if [ ! -x "$bin" ] && [ ! -f "$src_list" ]; then
    log "adding deb-src lines derived from the machine's own apt sources"
    # Same archive as the machine's binary packages, with Types: deb-src.
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources | as_root tee "$src_list" >/dev/null
  fi
  log "apt-get update"
  as_root apt-get update -qq >&2
  if [ ${#need_pkgs[@]} -gt 0 ]; then
    log "installing ${need_pkgs[*]}"
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${need_pkgs[@]}" >&2
  fi
fi

if [ ! -x "$bin" ]; then
  mkdir -p "$cache/src" "$cache/bin"
  cd "$cache/src"
  if ! ls kubernetes_*.orig.tar.gz >/dev/null 2>&1; then
    log "fetching Debian's kubernetes source package (about 34 MB)"
    apt-get source --download-only kubernetes >&2
  fi
  if [ ! -d kubernetes-1.20.2 ]; then
    log "unpacking"
    tar xzf kubernetes_*.orig.tar.gz
  fi
  cd kubernetes-1.20.2
  export GOPATH=$PWD/.go CGO_ENABLED=0 GOFLAGS=-mod=vendor
  mkdir -p .go/src/k8s.io && ln -sfn ../../.. .go/src/k8s.io/kubernetes
  log "building kube-apiserver (about 12 minutes on 2 cores; output follows)"
  start=$(date +%s)
  HOME=/tmp/nodestatus-gohome make WHAT=cmd/kube-apiserver >&2
  cp _output/local/bin/linux/amd64/kube-apiserver "$bin.tmp" && mv "$bin.tmp" "$bin"
  log "built in $(( $(date +%s) - start ))s: $bin"
fi
echo "$bin"
