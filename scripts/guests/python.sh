#!/usr/bin/env bash
# Builds the Python setters in plugins/python/*/ into WebAssembly components
# with componentize-py, after running the SDK's and the plugins' unit tests
# natively. Each plugin directory holds app.py (a class Setter subclassing
# nodestatus.Plugin); plugins/python/<name>/ (and each test component in
# tests/components/python/<name>/) becomes OUT_DIR/<name>.wasm, by
# write-then-rename so that a running engine never sees half a file. An
# app.py that binds `Reactor` (`Reactor = Setter`: a setter with subscribe
# and on_lines, WIT 0.2.1) builds with the world reactor-plugin, any other
# with the world plugin.
#
#   scripts/guests/python.sh [OUT_DIR]   (default: target/guest-plugins)
#
# Needs python3 with pip. componentize-py is installed once into
# ${NODESTATUS_CACHE:-~/.cache/nodestatus}/toolchains/python.
set -euo pipefail

COMPONENTIZE_PY_VERSION=0.25.1

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$root/target/guest-plugins}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 1; }

toolchain="${NODESTATUS_CACHE:-$HOME/.cache/nodestatus}/toolchains/python"
venv="$toolchain/venv"
site="$toolchain/site"
stamp="$toolchain/componentize-py-$COMPONENTIZE_PY_VERSION.ok"

# componentize-py from the venv, or from the --target install when python3
# has no venv module (Debian without python3-venv).
componentize_py() {
  if [ -x "$venv/bin/componentize-py" ]; then
    "$venv/bin/componentize-py" "$@"
  else
    PYTHONPATH="$site" python3 -c \
      'import sys; from componentize_py import script; sys.argv[0] = "componentize-py"; sys.exit(script())' "$@"
  fi
}

echo "== toolchain: componentize-py $COMPONENTIZE_PY_VERSION ($toolchain)"
if [ ! -f "$stamp" ]; then
  rm -rf "$venv" "$site"
  mkdir -p "$toolchain"
  if python3 -m venv "$venv" >/dev/null 2>&1; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      "componentize-py==$COMPONENTIZE_PY_VERSION"
  else
    rm -rf "$venv"
    echo "   (python3 -m venv is unavailable; installing with pip --target)"
    python3 -m pip install --quiet --disable-pip-version-check --target "$site" \
      "componentize-py==$COMPONENTIZE_PY_VERSION"
  fi
  componentize_py --version | grep -qF "$COMPONENTIZE_PY_VERSION"
  touch "$stamp"
fi

export PYTHONDONTWRITEBYTECODE=1 # no __pycache__ in the checkout

echo "== test: sdk/python (with the shared vectors in sdk/conformance)"
python3 -m unittest discover -q -s "$root/sdk/python" -t "$root/sdk/python"

# NODESTATUS_PLUGIN_DIRS: other plugin directories (space-separated) to
# build instead of plugins/python/*/ and tests/components/python/*/, as
# `nodestatus new` scaffolds them.
plugins=()
for dir in ${NODESTATUS_PLUGIN_DIRS:-"$root"/plugins/python/*/ "$root"/tests/components/python/*/}; do
  [ -f "$dir/app.py" ] && plugins+=("${dir%/}")
done
[ "${#plugins[@]}" -gt 0 ] || { echo "no plugins/python/*/app.py" >&2; exit 1; }

for dir in "${plugins[@]}"; do
  name="$(basename "$dir")"
  echo "== test: ${dir#"$root"/}"
  PYTHONPATH="$root/sdk/python" python3 -m unittest discover -q -s "$dir" -t "$dir"
done

# The inputs of a build, hashed: a component built from the same inputs is
# taken from the cache instead of being built again (about 12 s each).
inputs_key() {
  python3 - "$1" "$root" "$COMPONENTIZE_PY_VERSION" <<'PY'
import hashlib, os, sys
plugin, root, version = sys.argv[1:]
h = hashlib.sha256(version.encode())
files = []
for base in (os.path.join(root, "sdk/python/nodestatus"), plugin, os.path.join(root, "wit")):
    for d, dirs, names in os.walk(base):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        files += [os.path.join(d, n) for n in sorted(names) if not n.endswith(".pyc")]
for f in files:
    h.update(os.path.relpath(f, root).encode() + b"\0")
    with open(f, "rb") as fh:
        h.update(hashlib.sha256(fh.read()).digest())
print(h.hexdigest())
PY
}

# componentize-py runs the app once at build time and writes __pycache__ next
# to it, so it builds from a copy.
builds="$toolchain/builds"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$out" "$builds"
for dir in "${plugins[@]}"; do
  name="$(basename "$dir")"
  key="$(inputs_key "$dir")"
  cached="$builds/$name-${key:0:32}.wasm"
  if [ -f "$cached" ]; then
    echo "== build: $name -> $out/$name.wasm (unchanged, from the cache)"
  else
    echo "== build: $name -> $out/$name.wasm"
    mkdir -p "$stage/$name"
    # The setter's own files: not its build outputs, nor the kit that a
    # directory made by `nodestatus new` carries (its SDK is copied below).
    tar -C "$dir" --exclude=./dist --exclude=./nodestatus-kit --exclude=./target \
      --exclude=__pycache__ -cf - . | tar -C "$stage/$name" -xf -
    cp -R "$root/sdk/python/nodestatus" "$stage/$name/"
    rm -rf "$stage/$name/nodestatus/__pycache__"
    start=$SECONDS
    world=plugin
    if grep -qE '^(Reactor[[:space:]]*=|class Reactor\b)' "$dir/app.py"; then world=reactor-plugin; fi
    echo "   world $world"
    componentize_py -q -d "$root/wit" -w "$world" componentize -p "$stage/$name" app \
      -o "$stage/$name.wasm"
    echo "   $(($(stat -c %s "$stage/$name.wasm") / 1024)) KiB in $((SECONDS - start)) s"
    # Keep the 3 newest builds of each plugin.
    find "$builds" -maxdepth 1 -name "$name-*.wasm" -printf '%T@ %p\n' | sort -rn | tail -n +3 \
      | cut -d' ' -f2- | xargs -r rm -f
    mv "$stage/$name.wasm" "$cached.tmp" && mv "$cached.tmp" "$cached"
  fi
  if ! cmp -s "$cached" "$out/$name.wasm"; then
    cp "$cached" "$out/.$name.wasm.tmp"
    mv "$out/.$name.wasm.tmp" "$out/$name.wasm"
  fi
done
echo "$out"
