#!/usr/bin/env bash
# Builds a current Kubernetes control plane and kubelet from their own Go
# modules, once, into a cache outside the checkout: kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet and kubectl from
# k8s.io/kubernetes (v1.37.2 by default), and etcd from
# go.etcd.io/etcd/server/v3 at the version that Kubernetes' own go.mod
# requires. Idempotent: a cached build is reused. Prints the kube-apiserver's
# path on stdout's last line; the other binaries (etcd and kubectl included)
# sit beside it, with the source of the pause container (src/pause.c, for
# scripts/real-node.sh's sandbox image).
#
# How: a build module that requires k8s.io/kubernetes and points every staging
# module (k8s.io/api, k8s.io/client-go, ...) at its own published version
# (v0.MINOR.PATCH), the replace list read from Kubernetes' own go.mod; the
# version stamped with the same -X flags as Kubernetes' hack/lib/version.sh,
# so that /version and the kubelet's nodeInfo say v1.37.2.
#
#   NODESTATUS_CACHE        (default ~/.cache/nodestatus) holds k8s-<version>/
#   NODESTATUS_K8S_VERSION  (default 1.37.2) another release, for example 1.36.3
#
# Go comes from the machine (Go 1.26 or newer for 1.37; Debian's golang-go is
# too old) and its module proxy; the module and build caches are Go's own
# (~/go/pkg/mod, ~/.cache/go-build).
set -euo pipefail
version="${NODESTATUS_K8S_VERSION:-1.37.2}"
cache="${NODESTATUS_CACHE:-$HOME/.cache/nodestatus}"
dir="$cache/k8s-$version"
bindir="$dir/bin"
bin="$bindir/kube-apiserver"
# Bump when the build recipe changes; a cache with another marker is rebuilt.
recipe="k8s-$version go-modules stamped cgo0 apiserver,controller-manager,scheduler,kubelet,kubectl,etcd-from-go.mod pause.c"
marker="$bindir/.build-recipe"
cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
log() { printf '[ensure-apiserver] %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

fresh() {
  [ -f "$marker" ] && [ "$(cat "$marker")" = "$recipe" ] || return 1
  for c in "${cmds[@]}" etcd; do [ -x "$bindir/$c" ] || return 1; done
  [ -f "$dir/src/pause.c" ]
}

need_pkgs=()
command -v openssl >/dev/null 2>&1 || need_pkgs+=(openssl)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "installing ${need_pkgs[*]}"
  as_root flock /tmp/nodestatus-apt.lock apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive as_root flock /tmp/nodestatus-apt.lock apt-get install -y -qq "${need_pkgs[@]}" >&2
fi

# The version of staging module $1 to build with: $2 when the module proxy
# serves it, else the nearest earlier patch of the same minor that it
# serves, said on stderr (the proxy here refuses k8s.io/endpointslice
# v0.32.13, and serves v0.32.12).
served() { # module@version: whether the module proxy serves it
  local out
  out="$(cd / && go mod download -json "$1" 2>&1 || true)"
  ! grep -q '"Error"' <<<"$out"
}
served_version() {
  local m="$1" want="$2" v patch pre base
  if served "$m@$want"; then
    echo "$want"
    return
  fi
  base="${want%.*}"; patch="${want##*.}"
  case "$patch" in *[!0-9]*) log "$m@$want is not served, and a pre-release has no earlier patch"; echo "$want"; return ;; esac
  for ((pre = patch - 1; pre >= 0; pre--)); do
    v="$base.$pre"
    if served "$m@$v"; then
      log "$m@$want is not served by the module proxy: building with $v, the nearest earlier patch it serves"
      echo "$v"
      return
    fi
  done
  log "$m@$want is not served, nor any earlier patch of it"
  echo "$want"
}

if ! fresh; then
  PATH="$PATH:/usr/local/go/bin"
  command -v go >/dev/null 2>&1 || { log "no Go toolchain on PATH (Kubernetes $version needs Go 1.26 or newer)"; exit 1; }
  # 1.37.2 -> v0.37.2; a pre-release keeps its suffix: 1.38.0-beta.0 ->
  # v0.38.0-beta.0 (the staging modules are tagged alike).
  rest="${version#*.}"; minor="${rest%%.*}"; patch="${rest#*.}"
  staging_version="v0.$minor.$patch"
  work="$dir/build"
  mkdir -p "$work" "$bindir"
  cd "$work"
  # One lock per version: run.sh and test.sh may both ask at once.
  exec 9>"$dir/.lock"
  flock 9
  if ! fresh; then
    log "reading k8s.io/kubernetes@v$version's go.mod from the module proxy"
    info="$(go mod download -json "k8s.io/kubernetes@v$version")"
    gomod="$(python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])' <<<"$info")"
    moddir="$(python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])' <<<"$info")"
    mkdir -p "$dir/src"
    cp "$moddir/build/pause/linux/pause.c" "$dir/src/pause.c"
    chmod u+w "$dir/src/pause.c"
    goversion="$(awk '$1 == "go" { print $2; exit }' "$gomod")"
    {
      echo "module nodestatus.invalid/k8s-build"
      echo
      echo "go $goversion"
      echo
      echo "require k8s.io/kubernetes v$version"
      echo
      echo "replace ("
      # Every `k8s.io/x => ./staging/src/k8s.io/x` becomes the published
      # module at its own version (served_version: an earlier patch where
      # the proxy refuses that one).
      for m in $(awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print $1 }' "$gomod"); do
        printf '\t%s => %s %s\n' "$m" "$m" "$(served_version "$m" "$staging_version")"
      done
      echo ")"
    } >go.mod
    # etcd at the version Kubernetes' go.mod requires of its client.
    etcd_version="$(awk '$1 == "go.etcd.io/etcd/client/v3" { print $2; exit }' "$gomod")"
    [ -n "$etcd_version" ] || { log "no go.etcd.io/etcd/client/v3 in $gomod"; exit 1; }
    mkdir -p etcd
    cat >etcd/go.mod <<EOF
module nodestatus.invalid/etcd-build

go $goversion

require go.etcd.io/etcd/server/v3 $etcd_version
EOF
    start=$(date +%s)
    build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    ldflags="-s -w"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags="$ldflags -X $pkg.gitVersion=v$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
      ldflags="$ldflags -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
    done
    pkgs=(); for c in "${cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
    log "building ${cmds[*]} v$version from the Go module proxy (output follows)"
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$work/out/" "${pkgs[@]}" >&2
    log "building etcd $etcd_version"
    (cd etcd && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$work/out/etcd" go.etcd.io/etcd/server/v3 >&2)
    rm -f "$marker"
    for c in "${cmds[@]}" etcd; do
      cp "$work/out/$c" "$bindir/$c.tmp" && mv "$bindir/$c.tmp" "$bindir/$c"
    done
    "$bin" --version >&2
    echo "$recipe" >"$marker"
    log "built in $(($(date +%s) - start))s: $bindir"
  fi
fi
echo "$bin"
