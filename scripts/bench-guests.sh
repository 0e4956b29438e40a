#!/usr/bin/env bash
# The setters in other languages, side by side in one release run
# (host/benches/guests.rs): Python (cpu-features), JavaScript
# (load-average), Go with the SDK's types (local-disks) and Go with
# Kubernetes' types (k8s-types): each component's size, one `set` on a fresh
# and on a kept instance, on Winch's code, a cached activation, and a cold
# compile by Cranelift and by the default tiers.
#
#   scripts/bench-guests.sh
#
# Builds the guests first (scripts/guests/{python,js,go}.sh into
# target/guest-plugins). The raw result goes to bench/guests/<date>.json
# (committed): criterion's medians, the once-per-run lines, the sizes, the
# date, commit and load; scripts/guests-figures.py writes the tables of
# README.md and docs/benchmarks.md from the newest one.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/guest-plugins
scripts/guests/python.sh "$out" >/dev/null
scripts/guests/js.sh "$out" >/dev/null
scripts/guests/go.sh "$out" >/dev/null
load_before="$(cut -d' ' -f1 /proc/loadavg)"
started="$(date -u +%Y-%m-%dT%H:%MZ)"
rm -rf target/criterion/guest_* target/criterion/activate_*
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
cargo bench -p nodestatus --bench guests -- --warm-up-time 1 --measurement-time 3 | tee "$log"
load_after="$(cut -d' ' -f1 /proc/loadavg)"
mkdir -p bench/guests
stamp="$(date -u +%Y-%m-%dT%H%M)"
commit="$(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- crates host plugins sdk tests/components || echo +dirty)"
python3 scripts/guests-figures.py collect --log "$log" --criterion target/criterion \
  --components "$out" --date "$started" --commit "$commit" \
  --load "$load_before $load_after" >"bench/guests/.$stamp.json.tmp"
mv "bench/guests/.$stamp.json.tmp" "bench/guests/$stamp.json"
python3 scripts/guests-figures.py write
