#!/usr/bin/env bash
# The reacting plugins' bench for docs/benchmarks.md ("Reacting plugins:
# the kernel log to the node"): tests/all's events::bench on a release
# build, against the real kube-apiserver of scripts/ensure-apiserver.sh,
# with log-rules (node-problem-detector's kernel-monitor config and a bench
# monitor) following the real /dev/kmsg. Root only (it writes /dev/kmsg and
# sets kernel.printk_devkmsg to `on` for the floods, then back).
#
#   scripts/bench-events.sh
#
# The raw result goes to bench/events/<date>.json (committed), and
# scripts/events-figures.py writes the table of docs/benchmarks.md from
# the newest one.
set -euo pipefail
cd "$(dirname "$0")/.."
NODESTATUS_APISERVER="${NODESTATUS_APISERVER:-$(scripts/ensure-apiserver.sh | tail -n 1)}"
export NODESTATUS_APISERVER
PATH="$(dirname "$NODESTATUS_APISERVER"):$PATH"
export PATH
# One kernel-log bench at a time on this machine (scripts/bench-npd.sh takes
# the same lock): each writes /dev/kmsg and reads the other's lines.
exec 8>/tmp/nodestatus-kmsg-bench.lock
flock 8
cargo test --release -p nodestatus --test all -- --ignored --exact events::bench --nocapture
mkdir -p bench/events
stamp="$(date -u +%Y-%m-%dT%H%M)"
cp target/events-bench/result.json "bench/events/$stamp.json"
python3 scripts/events-figures.py
