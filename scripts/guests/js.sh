#!/usr/bin/env bash
# Builds the JavaScript setters in plugins/js/*/ into WebAssembly components
# with componentize-js (see docs/first-setter-javascript.md):
#
#   scripts/guests/js.sh [OUT_DIR]     (default: target/guest-plugins)
#
# 1. installs the build tools pinned in sdk/js/package-lock.json into
#    ${NODESTATUS_CACHE:-~/.cache/nodestatus}/toolchains/js, only when they
#    are missing or the lock changed;
# 2. runs the unit tests of sdk/js, plugins/js and tests/components/js with
#    `node --test`;
# 3. builds every plugins/js/<name>/setter.js (and each test component's,
#    tests/components/js/<name>/) into OUT_DIR/<name>.wasm, by
#    write-then-rename, so OUT_DIR can be a running engine's plugin directory;
#    a setter that exports `reactor` (defineReactor) with the world
#    reactor-plugin (build.mjs decides), any other with the world plugin.
#    Components are cached by the sha256 of their bundled source, so an
#    unchanged setter is copied, not rebuilt.
#
# NODESTATUS_JS_AOT=1 builds them ahead of time (build.mjs --aot): their
# JavaScript compiled by weval, the WebAssembly partial evaluator, instead of
# interpreted; weval comes from scripts/guests/weval.sh ($NODESTATUS_WEVAL,
# else weval 0.5.0 built once from crates.io).
#
# Needs Node.js >= 20.6 and npm. A relative OUT_DIR is taken from the
# repository root; the script works from any directory.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
log() { printf '== %s\n' "$*" >&2; }
die() { printf 'js.sh: %s\n' "$*" >&2; exit 1; }

out="${1:-target/guest-plugins}"
case "$out" in /*) ;; *) out="$repo/$out" ;; esac

command -v node >/dev/null || die "node not found: install Node.js 20.6 or newer (and npm)"
command -v npm >/dev/null || die "npm not found: install npm"
node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 6) ? 0 : 1)' ||
  die "Node.js $(node --version) is too old: 20.6 or newer is needed (module.register for the tests)"

cache="${NODESTATUS_CACHE:-$HOME/.cache/nodestatus}/toolchains/js"
sdk="$repo/sdk/js"
mkdir -p "$cache"

# One installer at a time; the stamp says what is installed.
exec 9>"$cache/.lock"
command -v flock >/dev/null && flock 9
want="$(cat "$sdk/package.json" "$sdk/package-lock.json" | sha256sum | cut -d' ' -f1) node$(node -p 'process.versions.node.split(".")[0]') $(uname -m)"
if [ -f "$cache/.stamp" ] && [ "$(cat "$cache/.stamp")" = "$want" ] && [ -d "$cache/node_modules" ]; then
  log "js tools: pinned versions already in $cache"
else
  log "js tools: npm install (componentize-js, jco, esbuild, as pinned in sdk/js/package-lock.json) into $cache"
  rm -rf "$cache/.stamp" "$cache/node_modules"
  cp "$sdk/package.json" "$sdk/package-lock.json" "$cache/"
  # `npm install --no-save` installs every version the lock pins, like
  # `npm ci`, but also fetches a platform's prebuilt binary package that the
  # lock lacks (a registry mirror that serves only some platforms writes such
  # a lock). --ignore-scripts: none of the tools needs an install script.
  (cd "$cache" && npm install --no-save --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
  printf '%s\n' "$want" >"$cache/.stamp"
fi
flock -u 9 2>/dev/null || true

aot=()
if [ "${NODESTATUS_JS_AOT:-0}" = 1 ]; then
  weval="$("$repo/scripts/guests/weval.sh")" || die "NODESTATUS_JS_AOT=1 needs weval (scripts/guests/weval.sh, above)"
  aot=(--aot --weval "$weval")
fi

# NODESTATUS_PLUGIN_DIRS: other plugin directories (space-separated) to test
# and build instead of plugins/js/*/, as `nodestatus new` scaffolds them.
dirs=(${NODESTATUS_PLUGIN_DIRS:-"$repo"/plugins/js/*/ "$repo"/tests/components/js/*/})
tests=(sdk/js plugins/js tests/components/js)
if [ -n "${NODESTATUS_PLUGIN_DIRS:-}" ]; then
  # The directories' own tests, not those of the SDK that a directory made
  # by `nodestatus new` carries in nodestatus-kit/.
  tests=()
  for d in "${dirs[@]}"; do
    for t in "${d%/}"/*.test.js "${d%/}"/*.test.mjs; do
      [ -f "$t" ] && tests+=("$t")
    done
  done
fi
log "unit tests: node --test ${tests[*]}"
(cd "$repo" && node --test --test-reporter=dot "${tests[@]}" >&2) ||
  { (cd "$repo" && node --test --test-reporter=spec "${tests[@]}" >&2) || true; die "unit tests failed (run: cd $repo && node --test ${tests[*]})"; }

mkdir -p "$out"
find "$cache/components" -name '*.wasm' -mtime +30 -delete 2>/dev/null || true
built=0
for dir in "${dirs[@]}"; do
  dir="${dir%/}"
  name="$(basename "$dir")"
  [ -f "$dir/setter.js" ] || { log "skipping plugins/js/$name: no setter.js"; continue; }
  # The folder's name is the plugin's name: check it against its metadata.
  meta="$(node --input-type=module -e '
    import { pathToFileURL } from "node:url";
    const [sdk, entry] = process.argv.slice(1);
    const { fakeHost } = await import(pathToFileURL(sdk + "/testing.js"));
    fakeHost();
    const { setter } = await import(pathToFileURL(entry));
    console.log(setter.metadata().name);
  ' "$sdk" "$dir/setter.js")" || die "plugins/js/$name/setter.js: cannot load it, or its metadata is invalid"
  [ "$meta" = "$name" ] || die "plugins/js/$name: metadata.name is \"$meta\"; name the folder after the plugin"
  log "build $name -> $out/$name.wasm${aot:+ (ahead of time)}"
  node "$sdk/build.mjs" --modules "$cache/node_modules" --wit "$repo/wit" --cache "$cache/components" \
    "${aot[@]}" --out "$out/$name.wasm" "$dir/setter.js"
  built=$((built + 1))
done
log "done: $built JavaScript plugin(s) in $out"
echo "$out"
