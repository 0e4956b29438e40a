#!/usr/bin/env bash
# Installs weval 0.5.0, the WebAssembly partial evaluator that
# componentize-js 0.23 compiles JavaScript ahead of time with
# (`sdk/js/build.mjs --aot`), and prints its path:
#
#   scripts/guests/weval.sh [--installed]
#
# --installed: only print the path of a weval already there (exit 1 when
# there is none), building nothing.
#
# $NODESTATUS_WEVAL, when set, is used as it is. Else weval is built once
# from crates.io (`cargo install --locked`) into
# ${NODESTATUS_CACHE:-~/.cache/nodestatus}/toolchains/weval-0.5.0, at the
# lowest CPU priority: about 10 minutes of one core (it links a wasmtime of
# its own). componentize-js would download a build from GitHub instead;
# this works where only the package registries are reachable. One installer
# at a time: a second waits for the first and uses its build.
set -euo pipefail
log() { printf '== %s\n' "$*" >&2; }
die() { printf 'weval.sh: %s\n' "$*" >&2; exit 1; }

only_installed=0
[ "${1:-}" = --installed ] && only_installed=1
if [ -n "${NODESTATUS_WEVAL:-}" ]; then
  [ -x "$NODESTATUS_WEVAL" ] || die "NODESTATUS_WEVAL=$NODESTATUS_WEVAL is not an executable file"
  echo "$NODESTATUS_WEVAL"
  exit 0
fi
version=0.5.0
root="${NODESTATUS_CACHE:-$HOME/.cache/nodestatus}/toolchains/weval-$version"
weval="$root/bin/weval"
if [ "$only_installed" = 1 ]; then
  [ -x "$weval" ] || exit 1
  echo "$weval"
  exit 0
fi
mkdir -p "$root"
exec 9>"$root/.lock"
command -v flock >/dev/null && flock 9
if [ ! -x "$weval" ]; then
  command -v cargo >/dev/null || die "cargo not found: install Rust (rustup), or set NODESTATUS_WEVAL to a weval $version binary"
  log "weval $version: cargo install into $root (once)"
  CARGO_TARGET_DIR="$root/build" CARGO_PROFILE_RELEASE_DEBUG=0 \
    nice -n 19 cargo install weval --version "$version" --locked --root "$root" >&2 ||
    die "cargo install weval $version failed (above)"
  rm -rf "$root/build"
fi
"$weval" --version >/dev/null 2>&1 || die "$weval does not run"
echo "$weval"
