#!/usr/bin/env bash
# Builds the Kubernetes 1.20.2 control plane (kube-apiserver,
# kube-controller-manager, kube-scheduler) and the kubelet once from Debian's
# `kubernetes` source package, and installs etcd, caching the binaries outside
# the checkout. Idempotent: a cached build is reused. Prints the
# kube-apiserver's path on stdout's last line; the other binaries sit beside it.
#
# The vendored reflect2 v1.0.1 corrupts memory when built with Go >= 1.18
# (requests die in recovered panics, seen by clients as dropped connections,
# and the server can crash in runtime.mapiternext). The build replaces it with
# Debian's reflect2 1.0.2, and a marker file next to the binaries records the
# recipe: a cache built without it (or by an older recipe) is rebuilt.
#
#   NODESTATUS_CACHE (default ~/.cache/nodestatus) holds bin/ and src/.
set -euo pipefail
cache="${NODESTATUS_CACHE:-$HOME/.cache/nodestatus}"
bindir="$cache/bin"
bin="$bindir/kube-apiserver"
# Bump when the build recipe changes; a cache with another marker is rebuilt.
recipe="k8s-1.20.2 reflect2-1.0.2 apiserver,controller-manager,scheduler,kubelet"
marker="$bindir/.build-recipe"
cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
log() { printf '[ensure-apiserver] %s\n' "$*" >&2; }

# scripts/test.sh runs this beside the guest toolchains' install: apt runs
# under one lock file so the two never race for dpkg's lock.
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

fresh() {
  [ -f "$marker" ] && [ "$(cat "$marker")" = "$recipe" ] || return 1
  for c in "${cmds[@]}"; do [ -x "$bindir/$c" ] || return 1; done
}

need_pkgs=()
command -v etcd >/dev/null 2>&1 || need_pkgs+=(etcd-server)
command -v openssl >/dev/null 2>&1 || need_pkgs+=(openssl)
command -v kubectl >/dev/null 2>&1 || need_pkgs+=(kubernetes-client)
if ! fresh; then
  command -v go >/dev/null 2>&1 || need_pkgs+=(golang-go)
  command -v rsync >/dev/null 2>&1 || need_pkgs+=(rsync)
  [ -d /usr/share/gocode/src/github.com/modern-go/reflect2 ] || need_pkgs+=(golang-github-modern-go-reflect2-dev)
fi
if [ ${#need_pkgs[@]} -gt 0 ] || { ! fresh && ! ls "$cache"/src/kubernetes_*.orig.tar.gz >/dev/null 2>&1; }; then
  src_list=/etc/apt/sources.list.d/nodestatus-deb-src.sources
  if ! fresh && [ ! -f "$src_list" ]; then
    log "adding deb-src lines derived from the machine's own apt sources"
    # Same archive as the machine's binary packages, with Types: deb-src.
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources | as_root tee "$src_list" >/dev/null
  fi
  log "apt-get update"
  as_root flock /tmp/nodestatus-apt.lock apt-get update -qq >&2
  if [ ${#need_pkgs[@]} -gt 0 ]; then
    log "installing ${need_pkgs[*]}"
    DEBIAN_FRONTEND=noninteractive as_root flock /tmp/nodestatus-apt.lock apt-get install -y -qq "${need_pkgs[@]}" >&2
  fi
fi

if ! fresh; then
  [ -f "$marker" ] || [ ! -e "$bin" ] || log "cached binaries predate the reflect2 fix: rebuilding"
  mkdir -p "$cache/src" "$bindir"
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
  log "replacing the vendored reflect2 v1.0.1 with Debian's 1.0.2"
  v=vendor/github.com/modern-go/reflect2
  rm -f "$v"/*.go "$v"/*.s
  cp /usr/share/gocode/src/github.com/modern-go/reflect2/*.go "$v"/
  cp /usr/share/gocode/src/github.com/modern-go/reflect2/*.s "$v"/ 2>/dev/null || true
  export GOPATH=$PWD/.go CGO_ENABLED=0 GOFLAGS=-mod=vendor
  mkdir -p .go/src/k8s.io && ln -sfn ../../.. .go/src/k8s.io/kubernetes
  log "building ${cmds[*]} (about 15 minutes on 2 cores; output follows)"
  start=$(date +%s)
  what=""; for c in "${cmds[@]}"; do what="$what cmd/$c"; done
  HOME=/tmp/nodestatus-gohome make WHAT="${what# }" >&2
  rm -f "$marker"
  for c in "${cmds[@]}"; do
    cp "_output/local/bin/linux/amd64/$c" "$bindir/$c.tmp" && mv "$bindir/$c.tmp" "$bindir/$c"
  done
  echo "$recipe" > "$marker"
  log "built in $(( $(date +%s) - start ))s: $bindir"
fi
echo "$bin"
