#!/usr/bin/env bash
# The fleet bench for docs/benchmarks.md ("A fleet in one process", issue
# 23): `nodestatus simulate --nodes N` against a real etcd, kube-apiserver
# (with its audit log) and kube-controller-manager (the node lifecycle
# controller, its default 50 s grace; Kubernetes 1.37), for each N, through
# these phases:
#
#   start     N agents started over N x 20 ms, until every node is Ready
#   idle      PHASE seconds (after 30 s to settle)
#   flapping  PHASE seconds, 1 % of the nodes flipping MemoryPressure every 60 s
#   rollout   150 s: every agent restarted, spread over 2 minutes (SIGUSR1)
#   outage    60 s: kube-apiserver stopped (etcd and the controller run on)
#   recovery  PHASE seconds after kube-apiserver is back
#
# Every 5 s it samples the nodes that are not Ready (the node lifecycle
# controller's view), the engine's CPU seconds and RSS. The test fleet::bench
# of tests/all runs it; scripts/fleet-figures.py turns the audit log and the
# samples into the table and the plots of docs/benchmarks.md.
#
#   scripts/fleet-bench.sh [N...]       (default: 100 1000)
#
# NODESTATUS_FLEET_PHASE_SECONDS (default 120) sets PHASE.
# NODESTATUS_BIN=path runs that nodestatus binary as the simulator (a
# release build, for figures to publish); by default the test's own
# (the dev profile: nodestatus's crates at opt-level 0, its dependencies,
# wasmtime among them, at 2). Results: target/fleet-bench/<N>/result.json and
# audit.log, the figures in docs/fleet-*.png and target/fleet-bench/table.md.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100 1000)
log() { printf '== %s\n' "$*" >&2; }

NODESTATUS_APISERVER="${NODESTATUS_APISERVER:-$(scripts/ensure-apiserver.sh | tail -n 1)}"
export NODESTATUS_APISERVER
[ -x "$(dirname "$NODESTATUS_APISERVER")/kube-controller-manager" ] || {
  log "kube-controller-manager is missing next to $NODESTATUS_APISERVER (scripts/ensure-apiserver.sh builds it)"
  exit 1
}
log "building the integration test binary"
bin="$(cargo test -p nodestatus --test all --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "all" and m.get("executable"):
        print(m["executable"])' | tail -n 1)"
[ -x "$bin" ] || { log "no test binary"; exit 1; }
out=target/fleet-bench
mkdir -p "$out"
for n in "${sizes[@]}"; do
  log "N = $n ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
  NODESTATUS_FLEET_NODES="$n" NODESTATUS_FLEET_OUT="$PWD/$out/$n" \
    "$bin" fleet::bench --exact --ignored --nocapture --test-threads 1
done
python3 scripts/fleet-figures.py "$out" docs "${sizes[@]}" | tee "$out/table.md"
