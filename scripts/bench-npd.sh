#!/usr/bin/env bash
# Side by side with node-problem-detector (issue 43, item 8), for
# docs/benchmarks.md: NPD (its published config/kernel-monitor.json,
# unchanged) and nodestatus (plugins/log-rules with that same file) on this
# machine, one real kube-apiserver (nodestatus run's embedded cluster, in a
# directory of its own, stopped at the end) and the same lines written to
# the real /dev/kmsg: the conditions and events each makes, the latency to
# the condition and to the Event, and CPU and RSS idle and in a flood of
# unmatched lines. Root only (it writes /dev/kmsg and sets
# kernel.printk_devkmsg to `on` for the run, then back). scripts/bench-npd.py
# does the run; this script finds or builds what it needs.
#
#   scripts/bench-npd.sh [bench-npd.py options: --messages 100 --flood-rate 10000 --flood-seconds 60 --idle 30]
#
# What it runs (each may be given):
#   NODESTATUS_BIN   target/release/nodestatus (else target/debug/nodestatus)
#   LOG_RULES_WASM   target/wasm-plugins/wasm32-wasip2/release/log_rules.wasm
#                    (scripts/build-plugins.sh builds it)
#   NPD_REPO         a clone of github.com/kubernetes/node-problem-detector
#                    (bare or not; /work/.mirror/kubernetes+node-problem-detector/repo);
#                    its HEAD is built once, with its vendored modules and
#                    without the journald tag (cgo, systemd headers), into
#                    ~/.cache/nodestatus/npd-<commit>/node-problem-detector
#   NODESTATUS_APISERVER  kube-apiserver (scripts/ensure-apiserver.sh)
#
# The raw result goes to bench/npd/<date>.json with the two tools' logs
# (bench/npd/<date>.nodestatus.log, .npd.log), and scripts/npd-figures.py
# writes the table of docs/benchmarks.md from the newest one.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

if [[ $(id -u) != 0 ]]; then
    echo "bench-npd.sh writes /dev/kmsg: run it as root" >&2
    exit 1
fi

bin="${NODESTATUS_BIN:-}"
if [[ -z $bin ]]; then
    if [[ -x target/release/nodestatus ]]; then bin=target/release/nodestatus; else bin=target/debug/nodestatus; fi
fi
bin="$(realpath "$bin")"
[[ -x $bin ]] || { echo "no nodestatus binary at $bin: cargo build --release" >&2; exit 1; }
case "$bin" in
    */release/*) profile=release ;;
    */debug/*) profile=debug ;;
    *) profile="${NODESTATUS_PROFILE:?say release or debug in NODESTATUS_PROFILE for $bin}" ;;
esac
wasm="$(realpath "${LOG_RULES_WASM:-target/wasm-plugins/wasm32-wasip2/release/log_rules.wasm}")"
[[ -f $wasm ]] || { echo "no log-rules plugin at $wasm: scripts/build-plugins.sh" >&2; exit 1; }

NODESTATUS_APISERVER="${NODESTATUS_APISERVER:-$(scripts/ensure-apiserver.sh | tail -n 1)}"

repo="${NPD_REPO:-/work/.mirror/kubernetes+node-problem-detector/repo}"
if [[ -d $repo/.git ]]; then gitdir="$repo/.git"; else gitdir="$repo"; fi
npd_commit="$(git --git-dir="$gitdir" rev-parse HEAD)"
cache="$HOME/.cache/nodestatus/npd-$npd_commit"
npd="$cache/node-problem-detector"
if [[ ! -x $npd ]]; then
    rm -rf "$cache/src"
    mkdir -p "$cache/src"
    git --git-dir="$gitdir" archive "$npd_commit" | tar -x -C "$cache/src"
    version="$(cat "$cache/src/version.txt")-${npd_commit:0:7}"
    echo "building node-problem-detector $version (vendored modules, no journald) into $cache" >&2
    (cd "$cache/src" && CGO_ENABLED=0 nice -n 10 go build -mod=vendor -o "$npd.tmp" \
        -ldflags "-X k8s.io/node-problem-detector/pkg/version.version=$version" ./cmd/nodeproblemdetector)
    mv "$npd.tmp" "$npd"
fi
if [[ ! -f $cache/src/config/kernel-monitor.json ]]; then
    mkdir -p "$cache/src"
    git --git-dir="$gitdir" archive "$npd_commit" config | tar -x -C "$cache/src"
fi

work="$(mktemp -d /tmp/bench-npd.XXXXXX)"
# A failed run leaves its configs and logs in $work, not the binary's copy.
trap 'rm -f "$work/nodestatus"' EXIT
# What runs is a copy: a build may replace the binary during the run. Its
# commit is the newest of its checkout before it was built (a build of
# uncommitted edits says no more than that).
cp "$bin" "$work/nodestatus"
cp "$wasm" "$work/log-rules.wasm"
built="$(stat -c %Y "$bin")"
ns_commit="$(git -C "$(dirname "$bin")" log -1 --before="@$built" --format=%h)"
ns_built="$(date -u -d "@$built" '+%Y-%m-%d %H:%M UTC')"
stamp="$(date -u +%Y-%m-%dT%H%M)"
mkdir -p bench/npd
out="$root/bench/npd/$stamp.json"

# One kernel-log bench at a time (scripts/bench-events.sh takes it too).
exec 8>/tmp/nodestatus-kmsg-bench.lock
flock 8
python3 scripts/bench-npd.py \
    --nodestatus "$work/nodestatus" --profile "$profile" --nodestatus-commit "$ns_commit" --nodestatus-built "$ns_built" \
    --plugin "$work/log-rules.wasm" --npd "$npd" --npd-commit "${npd_commit:0:12}" \
    --npd-config "$cache/src/config/kernel-monitor.json" \
    --apiserver "$NODESTATUS_APISERVER" --work "$work" --out "$out" "$@"
flock -u 8
cp "$work/nodestatus.log" "bench/npd/$stamp.nodestatus.log"
cp "$work/npd.log" "bench/npd/$stamp.npd.log"
python3 scripts/npd-figures.py
rm -rf "$work"
