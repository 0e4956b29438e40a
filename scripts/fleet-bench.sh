#!/usr/bin/env bash
# The fleet bench for docs/benchmarks.md ("A fleet in one process", issues
# 23 and 32): `nodestatus simulate --nodes N`, and beside it its peer kwok
# (sigs.k8s.io/kwok, built by scripts/ensure-kwok.sh), each against its own
# real etcd, kube-apiserver (with its audit log) and kube-controller-manager
# (the node lifecycle controller, its default 50 s grace; Kubernetes 1.37),
# the same for both, for each N, through these phases:
#
#   start     N nodes started over N x 20 ms, until every node is Ready
#             (nodestatus: N agents; kwok: its process, then N Node objects
#             created by the admin, as kwok's users do)
#   idle      PHASE seconds (after 30 s to settle)
#   flapping  PHASE seconds, 1 % of the nodes flipping MemoryPressure every
#             60 s (kwok has no flapping: a second idle window)
#   rollout   150 s: nodestatus: a vendor's new version of its plugin
#             `probe`, pushed to a local registry (Debian's docker-registry
#             2.8, with its access log), signed and named in the config that
#             simulate reads live (one pull for the process; each node
#             writes the change once); kwok: its process restarted (SIGTERM,
#             then a new one)
#   refused   PHASE seconds (nodestatus only): a version signed by another
#             key named in the config; every node keeps the one it runs
#   outage    60 s: kube-apiserver stopped (etcd and the controller run on)
#   recovery  PHASE seconds after kube-apiserver is back
#
# simulate's config reports an unchanged status every
# NODESTATUS_FLEET_REPORT_SECONDS (default 60; the kubelet's
# nodeStatusReportFrequency is 300), so that the forced report falls in
# every phase: the figures count the nodes that wrote one in the idle phase.
#
# It needs docker-registry, htpasswd and openssl (scripts/ensure-packages.sh
# docker-registry apache2-utils openssl). Every 5 s it samples the nodes that are not Ready (the node lifecycle
# controller's view), the engine's CPU seconds and RSS (for kwok, the kwok
# process). The tests fleet::bench and fleet_peer::bench_kwok of tests/all
# run it; scripts/fleet-figures.py turns the audit logs and the samples into
# the side-by-side table and the plots of docs/benchmarks.md.
#
#   scripts/fleet-bench.sh [--only nodestatus|kwok] [N...]   (default: 100 1000)
#
# NODESTATUS_FLEET_PHASE_SECONDS (default 120) sets PHASE.
# NODESTATUS_BIN=path runs that nodestatus binary as the simulator (a
# release build, for figures to publish); by default the test's own
# (the dev profile: nodestatus's crates at opt-level 0, its dependencies,
# wasmtime among them, at 2). NODESTATUS_KWOK=path runs that kwok (its
# stages, kwok.yaml and rbac/ beside it); by default scripts/ensure-kwok.sh
# builds and caches kwok 0.8.0 (only when kwok runs; scripts/test.sh never
# does). NODESTATUS_FLEET_FIGURES (default docs) is where the plots go.
# Results: target/fleet-bench/<engine>-<N>/result.json and audit.log, the
# figures in docs/fleet-<N>-rate.png and docs/fleet-kwok-<N>-rate.png, the
# tables in target/fleet-bench/table.md.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '== %s\n' "$*" >&2; }
engines=(nodestatus kwok)
if [ "${1:-}" = --only ]; then
  case "${2:-}" in
    nodestatus | kwok) engines=("$2") ;;
    *) log "usage: $0 [--only nodestatus|kwok] [N...]"; exit 2 ;;
  esac
  shift 2
fi
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100 1000)

NODESTATUS_APISERVER="${NODESTATUS_APISERVER:-$(scripts/ensure-apiserver.sh | tail -n 1)}"
export NODESTATUS_APISERVER
[ -x "$(dirname "$NODESTATUS_APISERVER")/kube-controller-manager" ] || {
  log "kube-controller-manager is missing next to $NODESTATUS_APISERVER (scripts/ensure-apiserver.sh builds it)"
  exit 1
}
if [[ " ${engines[*]} " = *" kwok "* ]]; then
  NODESTATUS_KWOK="${NODESTATUS_KWOK:-$(scripts/ensure-kwok.sh | tail -n 1)}"
  export NODESTATUS_KWOK
fi
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
  for engine in "${engines[@]}"; do
    case "$engine" in
      nodestatus) test=fleet::bench ;;
      kwok) test=fleet_peer::bench_kwok ;;
    esac
    log "N = $n, $engine ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
    NODESTATUS_FLEET_NODES="$n" NODESTATUS_FLEET_OUT="$PWD/$out/$engine-$n" \
      "$bin" "$test" --exact --ignored --nocapture --test-threads 1
  done
done
python3 scripts/fleet-figures.py "$out" "${NODESTATUS_FLEET_FIGURES:-docs}" "${sizes[@]}" | tee "$out/table.md"
