#!/usr/bin/env bash
# Builds the real cosign (sigstore's CLI) from its own Go module, once, into a
# cache outside the checkout, for tests/all/cosign.rs: the interop tests that
# check `cosign verify` accepts what `nodestatus plugin sign` writes and that
# nodestatus accepts what `cosign sign` writes. Idempotent: a cached build is
# reused. Prints the binary's path on stdout's last line.
#
#   scripts/ensure-cosign.sh [v2|v3]     (default v2)
#
#   v2  github.com/sigstore/cosign/v2 v2.6.5
#   v3  github.com/sigstore/cosign/v3 v3.1.3
#
#   NODESTATUS_CACHE           (default ~/.cache/nodestatus) holds cosign-<version>/
#   NODESTATUS_COSIGN_VERSION  another release of that major version, e.g. 2.6.4
#
# How: `go install -trimpath` of the module's cmd/cosign at that version, with
# CGO_ENABLED=0 (no PIV/PKCS#11 keys, as cosign's own `cosign-linux-amd64`
# release build) and the version stamped as cosign's Makefile does, so that
# `cosign version` says it. GOTOOLCHAIN=local: both versions build with the
# machine's Go 1.26, and no other toolchain is fetched behind your back.
#
# Go comes from the machine (/usr/local/go/bin is added to PATH) and its module
# proxy; the module and build caches are Go's own (~/go/pkg/mod,
# ~/.cache/go-build). A cold build (empty Go caches), per version, on the
# 2-core machine: about 35 s to download 275 MB of module zips (1.7 GB once
# extracted), then about 5 CPU-minutes of compiling (4 to 7 minutes of wall
# time, depending on what else runs); 1.25 GB of build cache and a 100 MB
# binary. With the Go caches warm, about 15 s; with this cache, nothing.
set -euo pipefail
major="${1:-v2}"
case "$major" in
  v2) default_version=2.6.5 ;;
  v3) default_version=3.1.3 ;;
  *) printf 'usage: %s [v2|v3]\n' "$0" >&2; exit 2 ;;
esac
version="${NODESTATUS_COSIGN_VERSION:-$default_version}"
version="${version#v}"
[ "${version%%.*}" = "${major#v}" ] || {
  printf '[ensure-cosign] NODESTATUS_COSIGN_VERSION=%s is not a %s release\n' "$version" "$major" >&2
  exit 2
}
module="github.com/sigstore/cosign/$major"
cache="${NODESTATUS_CACHE:-$HOME/.cache/nodestatus}"
dir="$cache/cosign-$version"
bin="$dir/cosign"
# Bump when the build recipe changes; a cache with another marker is rebuilt.
recipe="cosign-$version $module/cmd/cosign go-install trimpath cgo0 release-utils-version toolchain-local"
marker="$dir/.build-recipe"
log() { printf '[ensure-cosign] %s\n' "$*" >&2; }

fresh() {
  [ -f "$marker" ] && [ "$(cat "$marker")" = "$recipe" ] && [ -x "$bin" ]
}

if ! fresh; then
  PATH="$PATH:/usr/local/go/bin"
  command -v go >/dev/null 2>&1 || { log "no Go toolchain on PATH (cosign $version needs Go 1.25 or newer)"; exit 1; }
  mkdir -p "$dir"
  # One lock per version: two test runs may both ask at once.
  exec 9>"$dir/.lock"
  flock 9
  if ! fresh; then
    start=$(date +%s)
    work="$(mktemp -d "$dir/build.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
    pkg="release-utils/version"
    ldflags="-s -w -buildid= -X sigs.k8s.io/$pkg.gitVersion=v$version -X sigs.k8s.io/$pkg.gitTreeState=clean"
    ldflags="$ldflags -X sigs.k8s.io/$pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    log "building $module/cmd/cosign@v$version from the Go module proxy (output follows)"
    # Run outside any module, so that no go.mod or go.work around the caller
    # takes part.
    (cd "$work" && GOBIN="$work" GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off \
      go install -trimpath -ldflags "$ldflags" "$module/cmd/cosign@v$version" >&2)
    rm -f "$marker"
    cp "$work/cosign" "$bin.tmp" && mv "$bin.tmp" "$bin"
    "$bin" version >&2
    echo "$recipe" >"$marker"
    log "built in $(($(date +%s) - start))s: $bin"
  fi
fi
echo "$bin"
