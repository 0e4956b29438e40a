#!/usr/bin/env bash
# Builds the registry tools of the tests from their Go modules, once, into a
# cache outside the checkout. Idempotent: a cached build is reused. Prints
# the binary's path on stdout's last line.
#
#   scripts/ensure-registries.sh token-server|ggcr-registry|oras
#
#   token-server   distribution's own token server, the reference
#                  implementation of its token and OAuth2 specs
#                  (github.com/docker/distribution/contrib/token-server,
#                  release v2.8.3: htpasswd users, each granted the
#                  repositories under `<user>/`; Basic GET with
#                  `offline_token`, POST `grant_type=refresh_token`), in
#                  front of Debian's docker-registry 2.8 with `auth: token`,
#                  for tests/all/registry_auth.rs
#   ggcr-registry  go-containerregistry v0.21.7's registry (pkg/registry)
#                  with the OCI 1.1 referrers API on, over TLS
#                  (scripts/registries/ggcr-registry/main.go: its own
#                  cmd/registry leaves the API off), for tests/all/cosign.rs
#   oras           the ORAS CLI (oras.land/oras/cmd/oras, release v1.3.6),
#                  a client, not a registry: pushes and pulls artifacts as
#                  vendors do, for tests/all/oras.rs
#
#   NODESTATUS_CACHE  (default ~/.cache/nodestatus) holds
#                     token-server-2.8.3/, ggcr-registry-0.21.7/ and
#                     oras-1.3.6/
#
# How: `go build -trimpath -mod=readonly` in scripts/registries/<tool>/, a Go
# module whose go.mod and go.sum pin every dependency (the token server's
# release has no go.mod of its own: without the pins each build would take
# the newest version of each; oras's are its release's own), with
# CGO_ENABLED=0 and GOTOOLCHAIN=local (the machine's Go 1.26; no other
# toolchain is fetched behind your back). The recipe marker holds the
# sha256 of that directory's files, so a change to them rebuilds.
#
# Go comes from the machine (/usr/local/go/bin is added to PATH) and its
# module proxy; the module and build caches are Go's own (~/go/pkg/mod,
# ~/.cache/go-build). A cold build (empty Go caches) on the 2-core machine,
# measured on 2026-11-27 with the machine otherwise idle: token-server then
# ggcr-registry, 33 s of wall time for both (32 s and 1 s: the second
# reuses the standard library the first compiled; ggcr-registry alone, 42 s
# and 25 CPU-s), 34 MB of modules, 104 MB of build cache and two 7 MB
# binaries. oras alone, cold (fresh GOCACHE and GOMODCACHE), measured the
# same day with other builds running (load average 3): 52 s of wall time,
# 48 CPU-s, 36 MB of modules, 155 MB of build cache and a 12 MB binary.
# With the Go caches warm, about 3 s each (oras 9 s); with this cache,
# nothing.
set -euo pipefail
tool="${1:-}"
case "$tool" in
  token-server)
    version=2.8.3
    package=github.com/docker/distribution/contrib/token-server
    ;;
  ggcr-registry)
    version=0.21.7
    package=.
    ;;
  oras)
    version=1.3.6
    package=oras.land/oras/cmd/oras
    ;;
  *) printf 'usage: %s token-server|ggcr-registry|oras\n' "$0" >&2; exit 2 ;;
esac
src="$(cd "$(dirname "$0")/registries/$tool" && pwd)"
cache="${NODESTATUS_CACHE:-$HOME/.cache/nodestatus}"
dir="$cache/$tool-$version"
bin="$dir/$tool"
sources="$(cd "$src" && cat -- * | sha256sum | cut -c1-16)"
# Bump when the build recipe changes; a cache with another marker is rebuilt.
recipe="$tool-$version $package go-build mod-readonly trimpath cgo0 toolchain-local sources-$sources"
marker="$dir/.build-recipe"
log() { printf '[ensure-registries] %s\n' "$*" >&2; }

fresh() {
  [ -f "$marker" ] && [ "$(cat "$marker")" = "$recipe" ] && [ -x "$bin" ]
}

if ! fresh; then
  PATH="$PATH:/usr/local/go/bin"
  command -v go >/dev/null 2>&1 || { log "no Go toolchain on PATH ($tool needs Go 1.26)"; exit 1; }
  mkdir -p "$dir"
  # One lock per tool: two test runs may both ask at once.
  exec 9>"$dir/.lock"
  flock 9
  if ! fresh; then
    start=$(date +%s)
    work="$(mktemp -d "$dir/build.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
    log "building $tool $version ($package in $src) from the Go module proxy (output follows)"
    # GOWORK=off: no go.work around the checkout takes part.
    (cd "$src" && GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off GOFLAGS=-buildvcs=false \
      go build -mod=readonly -trimpath -ldflags "-s -w -buildid=" -o "$work/$tool" "$package" >&2)
    rm -f "$marker"
    cp "$work/$tool" "$bin.tmp" && mv "$bin.tmp" "$bin"
    echo "$recipe" >"$marker"
    log "built in $(($(date +%s) - start))s: $bin"
  fi
fi
echo "$bin"
