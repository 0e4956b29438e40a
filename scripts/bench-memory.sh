#!/usr/bin/env bash
# The memory table of docs/deployment.md: where the memory of a node with
# Python and JavaScript setters goes.
#
#   scripts/bench-memory.sh [MINUTES]   (default 5)
#
# 1. Compile peaks: the peak RSS (ru_maxrss) and the time of the compiler
#    child, `nodestatus compile-component <compiler>`, run as the engine
#    runs it (MALLOC_ARENA_MAX=2, the component on stdin), for the Python
#    (cpu-features), JavaScript (load-average) and C (memory-features)
#    guests and one Rust setter (os-arch), with Cranelift and with Winch.
# 2. The engine: scripts/rss.sh MINUTES (VmRSS and VmHWM of `nodestatus
#    run`, release build, warm cache) three times side by side, each with
#    its own embedded cluster: the default set; the default set plus
#    cpu-features and load-average (a fresh instance per call); the same
#    with reuseInstance (each keeps its instance). A first short run fills
#    the cache, so that no compile is measured in the three.
#
# NODESTATUS_BIN=path measures that binary (else a release build).
# Results: target/bench-memory/*.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-5}"
log() { printf '== %s\n' "$*" >&2; }
out=target/bench-memory
mkdir -p "$out"
guests="${NODESTATUS_GUEST_PLUGINS:-target/guest-plugins}"
if [ -z "${NODESTATUS_BIN:-}" ]; then
  cargo build --release -p nodestatus
  NODESTATUS_BIN=target/release/nodestatus
fi
export NODESTATUS_BIN
plugins="$(scripts/build-plugins.sh target/default-plugins | tail -n 1)"

log "compile peaks (uptime: $(uptime))"
for f in "$guests/cpu-features.wasm" "$guests/load-average.wasm" "$guests/memory-features.wasm" "$plugins/os-arch.wasm"; do
  for compiler in cranelift winch; do
    python3 - "$NODESTATUS_BIN" "$compiler" "$f" <<'EOF'
import os, resource, subprocess, sys, time
exe, compiler, path = sys.argv[1:4]
started = time.monotonic()
with open(path, "rb") as component:
    r = subprocess.run([exe, "compile-component", compiler], stdin=component,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env={"MALLOC_ARENA_MAX": "2"})
took = time.monotonic() - started
assert r.returncode == 0, r.stderr.decode()
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(f"{os.path.basename(path):22} {compiler:9} {os.path.getsize(path) / 1e6:6.1f} MB in, "
      f"peak RSS {peak / 1024:6.1f} MB, {took:6.2f} s, {len(r.stdout) / 1e6:6.1f} MB of code")
EOF
  done
done | tee "$out/compile.txt"

log "filling the precompile cache (target/rss-cache)"
NODESTATUS_RSS_GUESTS="cpu-features load-average" NODESTATUS_RSS_COMPILER=cranelift scripts/rss.sh 0 >/dev/null

log "the engine, three runs side by side, $minutes minutes each"
scripts/rss.sh "$minutes" >"$out/default.txt" 2>"$out/default.log" &
a=$!
NODESTATUS_RSS_GUESTS="cpu-features load-average" scripts/rss.sh "$minutes" >"$out/guests.txt" 2>"$out/guests.log" &
b=$!
NODESTATUS_RSS_GUESTS="cpu-features load-average" NODESTATUS_RSS_REUSE=true \
  scripts/rss.sh "$minutes" >"$out/guests-reuse.txt" 2>"$out/guests-reuse.log" &
c=$!
wait "$a" && wait "$b" && wait "$c"
for run in default guests guests-reuse; do
  printf '%s\n' "-- $run"
  cat "$out/$run.txt"
done
