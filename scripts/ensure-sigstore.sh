#!/usr/bin/env bash
# Builds Sigstore's own services from their Go modules, once, into a cache
# outside the checkout, for tests/all/keyless.rs: a real Fulcio (ephemeral
# CA) and a real Rekor v1 (on Trillian, on MariaDB) that real cosign signs
# against keyless. Idempotent: a cached build is reused. Prints the cache
# directory on stdout's last line; it holds
#
#   fulcio                 github.com/sigstore/fulcio            (the CA)
#   rekor-server           github.com/sigstore/rekor/cmd/rekor-server
#   trillian_log_server    github.com/google/trillian/cmd/trillian_log_server
#   trillian_log_signer    github.com/google/trillian/cmd/trillian_log_signer
#   trillian-storage.sql   Trillian's MySQL schema (from its module)
#
#   NODESTATUS_CACHE   (default ~/.cache/nodestatus) holds sigstore-<recipe>/
#   --cached           builds nothing: exit 0 when the build is cached, 1 if not
#
# The Debian packages scripts/sigstore-stack.sh needs beside them are
# installed here when missing: mariadb-server (Trillian's and Rekor's
# database: each stack starts its own mariadbd in its directory),
# python3-cryptography (the test OIDC issuer) and curl.
#
# A cold build (empty Go caches) on the 2-core machine: about 8 minutes of
# wall time (1 minute 54 s for Fulcio with its downloads, 6 minutes for Rekor
# and Trillian, while a cargo build ran beside it), more than 1.2 GB of
# module and build caches, 250 MB of binaries. Rekor stays at 1.5.4: 1.5.5 and later
# need Go 1.27.
#
# How: `go install -trimpath` of each command at its pinned version, with
# CGO_ENABLED=0, GOTOOLCHAIN=local and GOWORK=off, outside any module. Go's
# own module and build caches are used unless GOMODCACHE / GOCACHE say
# otherwise.
set -euo pipefail
fulcio_version=1.8.8
rekor_version=1.5.4
trillian_version=1.7.2
cache="${NODESTATUS_CACHE:-$HOME/.cache/nodestatus}"
dir="$cache/sigstore-fulcio$fulcio_version-rekor$rekor_version-trillian$trillian_version"
# Bump when the build recipe changes; a cache with another marker is rebuilt.
recipe="fulcio-$fulcio_version rekor-$rekor_version trillian-$trillian_version go-install trimpath cgo0 toolchain-local schema"
marker="$dir/.build-recipe"
log() { printf '[ensure-sigstore] %s\n' "$*" >&2; }

fresh() {
  [ -f "$marker" ] && [ "$(cat "$marker")" = "$recipe" ] &&
    for b in fulcio rekor-server trillian_log_server trillian_log_signer; do [ -x "$dir/$b" ] || return 1; done &&
    [ -f "$dir/trillian-storage.sql" ]
}

# --cached: only say (exit status) whether the build is in the cache.
if [ "${1:-}" = --cached ]; then
  fresh
  exit
fi

"$(dirname "$0")/ensure-packages.sh" mariadb-server python3-cryptography curl

if ! fresh; then
  PATH="$PATH:/usr/local/go/bin"
  command -v go >/dev/null 2>&1 || { log "no Go toolchain on PATH (Fulcio and Rekor need Go 1.24 or newer)"; exit 1; }
  mkdir -p "$dir"
  exec 9>"$dir/.lock"
  flock 9
  if ! fresh; then
    start=$(date +%s)
    work="$(mktemp -d "$dir/build.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
    build() {
      log "building $1@v$2 from the Go module proxy"
      (cd "$work" && GOBIN="$work" GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off \
        go install -trimpath -ldflags "-s -w -buildid=" "$1@v$2" >&2)
    }
    build github.com/sigstore/fulcio "$fulcio_version"
    build github.com/sigstore/rekor/cmd/rekor-server "$rekor_version"
    build github.com/google/trillian/cmd/trillian_log_server "$trillian_version"
    build github.com/google/trillian/cmd/trillian_log_signer "$trillian_version"
    modcache="$(cd "$work" && GOWORK=off go env GOMODCACHE)"
    cp "$modcache/github.com/google/trillian@v$trillian_version/storage/mysql/schema/storage.sql" "$work/trillian-storage.sql"
    rm -f "$marker"
    for f in fulcio rekor-server trillian_log_server trillian_log_signer trillian-storage.sql; do
      cp "$work/$f" "$dir/$f.tmp" && mv "$dir/$f.tmp" "$dir/$f"
    done
    echo "$recipe" >"$marker"
    log "built in $(($(date +%s) - start))s: $dir"
  fi
fi
echo "$dir"
