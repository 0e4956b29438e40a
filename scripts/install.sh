#!/usr/bin/env bash
# Puts `nodestatus` on your PATH: copies the release binary of this checkout
# to PREFIX/bin/nodestatus (PREFIX: the argument, else $PREFIX, else
# ~/.local), building it first only when it is missing or older than its
# sources. The binary is self-contained (the default config and the setter
# kit of `nodestatus new` are inside it), so the copy works without the
# checkout.
#
#   scripts/install.sh [PREFIX]   build if needed, install PREFIX/bin/nodestatus
#   scripts/install.sh --build    build if needed, print the binary's path; install nothing
#   scripts/install.sh --check    say whether the binary is current; build nothing
#                                 (exit 0: current, 1: a build is needed)
#
# NODESTATUS_BIN=PATH installs that binary instead (nothing is built).
#
# When the build is skipped: target/release/nodestatus (under
# $CARGO_TARGET_DIR when set) is current when it is newer than every file
# it was built from. Cargo lists those in target/release/nodestatus.d
# (every Rust source of the workspace crates it links, the files they
# include, and the directories their build scripts watch, read recursively);
# beside them Cargo.lock, .cargo/config.toml and the Cargo.toml of the
# workspace, host/ and crates/*, for a dependency or profile change. This is cargo's own rule (modification times of the same files),
# without cargo: no wait on another build's lock on target/. A new rustc or
# changed RUSTFLAGS is not seen: run `cargo build --release -p nodestatus`
# yourself after either.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '== %s\n' "$*" >&2; }

mode=install
case "${1:-}" in
  --build) mode=build; shift ;;
  --check) mode=check; shift ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
prefix="${1:-${PREFIX:-$HOME/.local}}"
target_dir="${CARGO_TARGET_DIR:-target}"
bin="$target_dir/release/nodestatus"

# Prints why $bin needs a build (and returns 1), or returns 0 when current.
stale() {
  [ -x "$bin" ] || { echo "no $bin yet (a first build: it compiles wasmtime, many minutes)"; return 1; }
  local dep="$bin.d"
  [ -f "$dep" ] || { echo "no $dep (cargo's list of its sources)"; return 1; }
  local us=$'\x1f' line src newer
  # `target: a b c\ d` on one line; an escaped space is part of a path.
  line="$(head -n 1 "$dep")"
  line="${line#*: }"
  line="${line//\\ /$us}"
  local -a words srcs=(Cargo.lock Cargo.toml host/Cargo.toml crates/*/Cargo.toml)
  [ ! -e .cargo/config.toml ] || srcs+=(.cargo/config.toml)
  read -r -a words <<<"$line"
  for src in "${words[@]}"; do srcs+=("${src//$us/ }"); done
  for src in "${srcs[@]}"; do
    [ -e "$src" ] || { echo "$src is gone"; return 1; }
    newer="$(find "$src" -newer "$bin" -print -quit 2>/dev/null)"
    [ -z "$newer" ] || { echo "$newer changed"; return 1; }
  done
  return 0
}

if [ -n "${NODESTATUS_BIN:-}" ]; then
  bin="$NODESTATUS_BIN"
  [ "$mode" != check ] || { echo "NODESTATUS_BIN=$bin: nothing to build"; exit 0; }
elif [ "$mode" = check ]; then
  if why="$(stale)"; then echo "$bin is current: no build"; exit 0; fi
  echo "would build $bin: $why"
  exit 1
elif ! why="$(stale)"; then
  log "building $bin (release): $why"
  scripts/ensure-packages.sh protobuf-compiler
  cargo build --release -p nodestatus
else
  log "$bin is current (newer than its sources): no build"
fi
if [ "$mode" = build ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$prefix/bin"
# A temp file and a rename: a nodestatus running from there keeps its file.
cp "$bin" "$prefix/bin/.nodestatus.tmp"
chmod 755 "$prefix/bin/.nodestatus.tmp"
mv "$prefix/bin/.nodestatus.tmp" "$prefix/bin/nodestatus"
log "installed $prefix/bin/nodestatus ($("$prefix/bin/nodestatus" --version 2>/dev/null || echo "version unknown"))"
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) log "$prefix/bin is not on your PATH: add  export PATH=\"$prefix/bin:\$PATH\"  to your shell's profile" ;;
esac
echo "$prefix/bin/nodestatus"
