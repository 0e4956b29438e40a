#!/usr/bin/env bash
# Builds kwok (sigs.k8s.io/kwok: the tool the field uses to fake thousands of
# nodes) from its own Go module, once, into a cache outside the checkout, for
# the fleet bench's peer (scripts/fleet-bench.sh, issue 32): its controller
# binary, cmd/kwok, and beside it what kwok's own install gives it, copied
# from the same module. Idempotent: a cached build is reused. Prints the
# binary's path on stdout's last line. Beside it:
#
#   stages/  kwok's stage-fast set (kustomize/stage/fast/), the stages that
#            kwokctl writes into kwok's config by default when leases are on
#            (its getDefaultNodeStages and getDefaultPodStages):
#              node-initialize.yaml            the node made Ready, once
#              node-heartbeat-with-lease.yaml  its status heartbeat, every
#                                              600 to 610 s; the lease
#                                              controller renews the lease
#                                              every duration/4 (10 s)
#              pod-ready.yaml, pod-complete.yaml, pod-delete.yaml
#                                              (no pod runs in the bench, but
#                                              kwok watches pods whatever its
#                                              stages)
#   kwok.yaml       the KwokConfiguration of kwok's in-cluster Deployment
#                   (kustomize/kwok/kwok.yaml; kwok applies no defaults to a
#                   config file, so every option is in it)
#   rbac/role.yaml  the ClusterRole of kwok's controller (kustomize/rbac/)
#
#   NODESTATUS_CACHE         (default ~/.cache/nodestatus) holds kwok-<version>/
#   NODESTATUS_KWOK_VERSION  (default 0.8.0) another release (only 0.8.0 was tried)
#
# How: `go install -trimpath` of sigs.k8s.io/kwok/cmd/kwok at that version
# (kwok's go.mod has no replace, so the module builds as published), with
# CGO_ENABLED=0 and the version stamped as kwok's hack/releases.sh does.
# GOTOOLCHAIN=local: kwok 0.8.0 needs Go 1.26, the machine's; no other
# toolchain is fetched behind your back.
#
# Go comes from the machine (/usr/local/go/bin is added to PATH) and its module
# proxy; the module and build caches are Go's own (~/go/pkg/mod,
# ~/.cache/go-build). scripts/test.sh never runs this: only the fleet bench
# needs kwok.
set -euo pipefail
version="${NODESTATUS_KWOK_VERSION:-0.8.0}"
version="${version#v}"
module="sigs.k8s.io/kwok"
cache="${NODESTATUS_CACHE:-$HOME/.cache/nodestatus}"
dir="$cache/kwok-$version"
bin="$dir/kwok"
stages="$dir/stages"
node_stages=(node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml)
pod_stages=(pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml)
# Bump when the build recipe changes; a cache with another marker is rebuilt.
recipe="kwok-$version $module/cmd/kwok go-install trimpath cgo0 consts-version toolchain-local stages:node-initialize,node-heartbeat-with-lease,pod-fast kwok.yaml rbac/role.yaml"
marker="$dir/.build-recipe"
log() { printf '[ensure-kwok] %s\n' "$*" >&2; }

fresh() {
  [ -f "$marker" ] && [ "$(cat "$marker")" = "$recipe" ] && [ -x "$bin" ] || return 1
  for s in "${node_stages[@]}" "${pod_stages[@]}"; do [ -f "$stages/$(basename "$s")" ] || return 1; done
  [ -f "$dir/rbac/role.yaml" ] && [ -f "$dir/kwok.yaml" ]
}

if ! fresh; then
  PATH="$PATH:/usr/local/go/bin"
  command -v go >/dev/null 2>&1 || { log "no Go toolchain on PATH (kwok $version needs Go 1.26 or newer)"; exit 1; }
  mkdir -p "$dir"
  # One lock per version: two bench runs may both ask at once.
  exec 9>"$dir/.lock"
  flock 9
  if ! fresh; then
    start=$(date +%s)
    work="$(mktemp -d "$dir/build.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
    ldflags="-s -w -buildid= -X $module/pkg/consts.Version=$version"
    log "building $module/cmd/kwok@v$version from the Go module proxy (output follows)"
    # Outside any module, so that no go.mod or go.work around the caller
    # takes part.
    (cd "$work" && GOBIN="$work" GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off \
      go install -trimpath -ldflags "$ldflags" "$module/cmd/kwok@v$version" >&2)
    # The stages, from the same module in Go's module cache.
    moddir="$(cd "$work" && GOTOOLCHAIN=local GOWORK=off go mod download -json "$module@v$version" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
    rm -f "$marker"
    rm -rf "$stages.tmp" && mkdir -p "$stages.tmp"
    for s in "${node_stages[@]}" "${pod_stages[@]}"; do
      cp "$moddir/kustomize/stage/$s" "$stages.tmp/"
    done
    chmod -R u+w "$stages.tmp"
    rm -rf "$stages" && mv "$stages.tmp" "$stages"
    mkdir -p "$dir/rbac"
    for f in rbac/role.yaml:rbac/role.yaml kwok/kwok.yaml:kwok.yaml; do
      cp "$moddir/kustomize/${f%%:*}" "$dir/${f#*:}.tmp"
      chmod u+w "$dir/${f#*:}.tmp" && mv "$dir/${f#*:}.tmp" "$dir/${f#*:}"
    done
    cp "$work/kwok" "$bin.tmp" && mv "$bin.tmp" "$bin"
    "$bin" --version >&2
    echo "$recipe" >"$marker"
    log "built in $(($(date +%s) - start))s: $bin"
  fi
fi
echo "$bin"
