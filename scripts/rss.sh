#!/usr/bin/env bash
# The memory of `nodestatus run` with the default setters, for
# docs/benchmarks.md: VmRSS and VmHWM from /proc/<pid>/status of the engine
# process (not its embedded apiserver's), sampled every 30 s.
#
#   scripts/rss.sh [MINUTES] [RELOADS]   (defaults: 10 and 0)
#
# It runs the release build as scripts/run.sh does (the embedded apiserver
# when no KUBECONFIG is set, deploy/default-config.yaml) on a copy of the
# default setters, with its own precompile cache (target/rss-cache: run it
# twice, or once before, for the figures with a warm cache) and no HTTP
# listener; NODESTATUS_CONFIG=path runs another config (default
# deploy/default-config.yaml). NODESTATUS_BIN=path runs that binary instead of building one (a
# copy of it, so that a rebuild cannot swap the compile child under it). After MINUTES, it hot-reloads RELOADS new builds: each time one of
# the eleven files is replaced (write, rename) by itself plus a custom
# section, unique to the run, that makes it a new file (a new sha256, so a
# compile in the child and a new cache entry), and it waits for the engine's "plugin reloaded" line
# before the next. Then it samples once more after a minute. Prints one line a
# sample: elapsed seconds, VmRSS and VmHWM in kB, and what happened.
#
# NODESTATUS_RSS_GUESTS="cpu-features load-average" adds those setters from
# target/guest-plugins (scripts/guests/*.sh build them), each granted /proc,
# with reuseInstance: $NODESTATUS_RSS_REUSE (default false) (scripts/
# bench-memory.sh runs it so, for the memory table of docs/deployment.md).
# NODESTATUS_RSS_COMPILER=cranelift|winch|tiered sets `compiler`.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-10}"
reloads="${2:-0}"
log() { printf '== %s\n' "$*" >&2; }

work="$(mktemp -d)"
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || true
  fi
  # The embedded cluster outlives the engine (as a real one): stop it.
  [ -x "$work/nodestatus" ] && "$work/nodestatus" run --embedded-stop --embedded-dir "$work/embedded" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

plugins="$(scripts/build-plugins.sh target/default-plugins | tail -n 1)"
if [ -z "${NODESTATUS_BIN:-}" ]; then
  cargo build --release -p nodestatus
  NODESTATUS_BIN=target/release/nodestatus
fi
cp "$NODESTATUS_BIN" "$work/nodestatus"
if [ -z "${KUBECONFIG:-}" ]; then
  NODESTATUS_APISERVER="$(scripts/ensure-apiserver.sh | tail -n 1)"
  export NODESTATUS_APISERVER
fi
mkdir -p "$work/plugins" target/rss-cache
chmod 700 target/rss-cache
cp "$plugins"/*.wasm "$work/plugins/"
config="${NODESTATUS_CONFIG:-deploy/default-config.yaml}"
guests=(${NODESTATUS_RSS_GUESTS:-})
if [ ${#guests[@]} -gt 0 ]; then
  cp "$config" "$work/config.yaml"
  config="$work/config.yaml"
  for g in "${guests[@]}"; do
    cp "${NODESTATUS_GUEST_PLUGINS:-target/guest-plugins}/$g.wasm" "$work/plugins/"
    # plugins: is the config's last key.
    printf '  %s:\n    paths: [/proc]\n    reuseInstance: %s\n' "$g" "${NODESTATUS_RSS_REUSE:-false}" >>"$config"
  done
fi
if [ -n "${NODESTATUS_RSS_COMPILER:-}" ]; then
  [ "$config" = "$work/config.yaml" ] || cp "$config" "$work/config.yaml"
  config="$work/config.yaml"
  printf 'compiler: %s\n' "$NODESTATUS_RSS_COMPILER" >>"$config"
fi
expected=$((11 + ${#guests[@]}))
engine_log="$work/nodestatus.log"

status() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$pid/status"; }
sample() {
  printf '%6d s  VmRSS %7s kB  VmHWM %7s kB  %s\n' \
    "$(($(date +%s) - started))" "$(status VmRSS)" "$(status VmHWM)" "$1"
}

log "uptime: $(uptime)"
log "starting nodestatus run (log: $engine_log)"
"$work/nodestatus" run --plugin-dir "$work/plugins" --config "$config" \
  --cache-dir "$PWD/target/rss-cache" --address "" --embedded-dir "$work/embedded" >"$engine_log" 2>&1 &
pid=$!
until grep -q 'plugin loaded' "$engine_log" 2>/dev/null; do
  kill -0 "$pid" 2>/dev/null || { cat "$engine_log" >&2; exit 1; }
  sleep 1
done
loaded_count() { grep -c "plugin loaded" "$engine_log" || true; }
until [ "$(loaded_count)" -ge "$expected" ]; do
  kill -0 "$pid" 2>/dev/null || { cat "$engine_log" >&2; exit 1; }
  sleep 1
done
started="$(date +%s)"
sample "$expected plugins loaded"
for ((i = 1; i <= minutes * 2; i++)); do
  sleep 30
  sample "$((i * 30 / 60)) min $((i * 30 % 60)) s"
done

if [ "$reloads" -gt 0 ]; then
  names=("$work"/plugins/*.wasm)
  # Unique to this run, so that no reload finds its build in the cache.
  run_id="$(date +%s)-$$"
  reloaded() { grep -c "plugin reloaded" "$engine_log" || true; }
  for ((i = 1; i <= reloads; i++)); do
    file="${names[$(((i - 1) % ${#names[@]}))]}"
    before="$(reloaded)"
    python3 - "$plugins/$(basename "$file")" "$work/plugins/.next.tmp" "$run_id-$i" <<'EOF'
import sys
src, dest, n = sys.argv[1], sys.argv[2], sys.argv[3]
def leb(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)
name = b"rss-reload"
payload = leb(len(name)) + name + n.encode()
with open(src, "rb") as f:
    data = f.read()
with open(dest, "wb") as f:
    f.write(data + b"\x00" + leb(len(payload)) + payload)
EOF
    mv "$work/plugins/.next.tmp" "$file"
    until [ "$(reloaded)" -gt "$before" ]; do
      kill -0 "$pid" 2>/dev/null || { tail -n 20 "$engine_log" >&2; exit 1; }
      sleep 0.2
    done
    if ((i % 10 == 0)); then sample "$i hot reloads"; fi
  done
  sleep 60
  sample "$reloads hot reloads, a minute later"
fi
log "uptime: $(uptime)"
