#!/usr/bin/env bash
# The default pass, side by side in one release run (the `pass/default`
# group of host/benches/default_set.rs): every setter called (`wasm`,
# `wasm-steady`, `wasm-fresh`), the steady pass with the node's memo
# (`wasm-incremental`: incrementalPasses, issue 44), the same setters
# compiled natively and run every pass (`native`, the kubelet's way), and
# the host's work around the calls.
#
#   scripts/bench-passes.sh
#
# The raw result goes to bench/passes/<date>.json (committed): criterion's
# medians, the setters the settled incremental pass still called on this
# machine, the date, commit and load; scripts/passes-figures.py writes the
# table of docs/benchmarks.md from the newest one.
set -euo pipefail
cd "$(dirname "$0")/.."
load_before="$(cut -d' ' -f1 /proc/loadavg)"
started="$(date -u +%Y-%m-%dT%H:%MZ)"
rm -rf target/criterion/pass_default
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
cargo bench -p nodestatus --bench default_set -- --warm-up-time 1 --measurement-time 3 'pass/default/' 2>&1 | tee "$log"
load_after="$(cut -d' ' -f1 /proc/loadavg)"
stamp="$(date -u +%Y-%m-%dT%H%M)"
commit="$(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- crates host plugins sdk || echo +dirty)"
python3 scripts/passes-figures.py collect --log "$log" --criterion target/criterion \
  --date "$started" --commit "$commit" --load "$load_before $load_after" >"bench/passes/.$stamp.json.tmp"
mv "bench/passes/.$stamp.json.tmp" "bench/passes/$stamp.json"
python3 scripts/passes-figures.py write
