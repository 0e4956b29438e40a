#!/usr/bin/env bash
# Label for label beside nfd-worker (issue 49, item 3): runs NFD's own
# nfd-worker (-oneshot -no-publish, its labels from its log at -v=1) and
# nodestatus's `features` setter (`nodestatus once`) on this machine, with
# the same config and the same feature files, and compares every label.
#
#   NODESTATUS_NFD_SRC=DIR scripts/bench-nfd.sh [OUT_DIR]
#
# DIR is a checkout of github.com/kubernetes-sigs/node-feature-discovery, or
# the git directory of one (the `fetch` tool's mirror): the Go module proxy
# refuses NFD's module, so CI cannot build it, and this bench is run by hand
# and its raw results committed (OUT_DIR, default docs/bench/nfd). nfd-worker
# is built once from it with the machine's Go into
# ${NODESTATUS_CACHE:-~/.cache/nodestatus}/nfd-<commit>/.
#
# Two cases, each the same input to both:
#   default     no worker config; the feature files of NFD's customization
#               guide (docs/bench/nfd/input/features.d);
#   documented  a worker config written as NFD documents it
#               (input/nfd-worker.conf: label sources, PCI classes and label
#               fields, kernel options) and the same feature files.
# nfd-worker reads its feature files from the fixed path
# /etc/kubernetes/node-feature-discovery/features.d: it runs in a mount
# namespace of its own (unshare -m, root) with the input bind-mounted there
# (the directory is created if missing, and removed after if it was); the
# setter is granted the input mapped at that path.
#
# OUT_DIR gets, per case, CASE.nfd.txt and CASE.nodestatus.txt (label=value,
# sorted), CASE.diff.tsv (every difference, with its reason from
# input/reasons.tsv, or "no reason known"), the tools' logs, and meta.tsv
# (date, commits, load); scripts/nfd-compare.py writes the summary table in
# docs/features.md from them.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
out="${1:-docs/bench/nfd}"
input="docs/bench/nfd/input"
src="${NODESTATUS_NFD_SRC:?set NODESTATUS_NFD_SRC to a node-feature-discovery checkout or git directory}"
cache="${NODESTATUS_CACHE:-$HOME/.cache/nodestatus}"
die() { printf 'bench-nfd.sh: %s\n' "$*" >&2; exit 1; }
step() { printf '== %s\n' "$*" >&2; }
[ "$(id -u)" = 0 ] || die "needs root: nfd-worker runs in a mount namespace of its own (unshare -m) to read the input's feature files"

# ------------------------------------------------------------- nfd-worker
if [ -d "$src/objects" ] && [ -f "$src/HEAD" ]; then
  gitdir="$src"
else
  gitdir="$(git -C "$src" rev-parse --absolute-git-dir 2>/dev/null || true)"
fi
[ -n "$gitdir" ] || die "$src is not a git checkout or git directory of node-feature-discovery"
nfd_commit="$(git --git-dir="$gitdir" rev-parse HEAD)"
nfd_version="$(git --git-dir="$gitdir" describe --tags --always HEAD 2>/dev/null || echo "$nfd_commit")"
worker="$cache/nfd-${nfd_commit:0:12}/nfd-worker"
if ! [ -x "$worker" ]; then
  step "nfd-worker at ${nfd_commit:0:12}, built with $(go env GOVERSION) (once)"
  build="$(mktemp -d)"
  git --git-dir="$gitdir" archive HEAD | tar -x -C "$build"
  mkdir -p "$(dirname "$worker")"
  (cd "$build" && go build -o "$worker.tmp" ./cmd/nfd-worker) >&2
  mv "$worker.tmp" "$worker"
  rm -rf "$build"
fi

# ------------------------------------------------------------- nodestatus
step "nodestatus and the features setter"
cargo build --workspace --bins --quiet >&2
nodestatus="$repo/target/debug/nodestatus"
plugins="$(scripts/build-plugins.sh target/default-plugins 2>/dev/null)"
features_wasm="$repo/$plugins/features.wasm"
[ -f "$features_wasm" ] || die "no features.wasm in $plugins"

mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# nfd-worker builds a client at its start even with -no-publish (it sends
# nothing then): a kubeconfig that points nowhere.
cat >"$work/kubeconfig" <<'EOF'
apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: none, user: {token: none}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
EOF

fdir=/etc/kubernetes/node-feature-discovery/features.d
made=()
for d in /etc/kubernetes /etc/kubernetes/node-feature-discovery "$fdir"; do
  [ -d "$d" ] || { mkdir "$d"; made=("$d" "${made[@]}"); }
done
cleanup_dirs() { for d in "${made[@]}"; do rmdir "$d" 2>/dev/null || true; done; }
trap 'cleanup_dirs; rm -rf "$work"' EXIT

run_case() { # name worker-config-or-empty
  local name=$1 conf=$2
  step "case $name: nfd-worker -oneshot -no-publish -v=1"
  local args=(-oneshot -no-publish -v=1 -kubeconfig "$work/kubeconfig" -config "${conf:-/nonexistent}")
  NODE_NAME="$(hostname)" unshare -m sh -c '
    mount --bind "$1" "$2" && shift 2 && exec "$@"' sh "$repo/$input/features.d" "$fdir" \
    "$worker" "${args[@]}" >"$out/$name.nfd.log" 2>&1 ||
    die "nfd-worker failed (case $name): the end of $out/$name.nfd.log: $(tail -n 5 "$out/$name.nfd.log")"
  python3 scripts/nfd-compare.py nfd-log "$out/$name.nfd.log" >"$out/$name.nfd.txt"

  step "case $name: nodestatus once --plugin features.wasm"
  python3 - "$conf" "$repo/$input/features.d" >"$work/$name.yaml" <<'PY'
import json, sys
conf, fdir = sys.argv[1], sys.argv[2]
worker = {}
if conf:
    import yaml  # PyYAML, as the book's scripts use
    worker = yaml.safe_load(open(conf)) or {}
section = {
    "reuseInstance": True,
    "paths": ["/sys", "/proc", "/boot",
              {"path": "/etc/kubernetes/node-feature-discovery/features.d", "from": fdir}],
    "config": worker,
}
print(json.dumps({"plugins": {"features": section}}))
PY
  "$nodestatus" once --plugin "$features_wasm" --config "$work/$name.yaml" \
    >"$work/$name.node.json" 2>"$out/$name.nodestatus.log" ||
    die "nodestatus once failed (case $name): $(tail -n 5 "$out/$name.nodestatus.log")"
  python3 scripts/nfd-compare.py node "$work/$name.node.json" >"$out/$name.nodestatus.txt"
  python3 scripts/nfd-compare.py diff "$out/$name.nfd.txt" "$out/$name.nodestatus.txt" \
    "$input/reasons.tsv" >"$out/$name.diff.tsv"
}
run_case default ""
run_case documented "$repo/$input/nfd-worker.conf"

commit="$(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- crates host plugins || echo +dirty)"
{
  printf 'date\t%s\n' "$(date -u +%Y-%m-%dT%H:%MZ)"
  printf 'nodestatus\t%s\n' "$commit"
  printf 'nfd-worker\t%s (%s)\n' "$nfd_version" "${nfd_commit:0:12}"
  printf 'go\t%s\n' "$(go env GOVERSION)"
  printf 'kernel\t%s\n' "$(uname -r)"
  printf 'load\t%s\n' "$(cut -d' ' -f1 /proc/loadavg)"
} >"$out/meta.tsv"
python3 scripts/nfd-compare.py table "$out" --write docs/features.md
step "done: $out (the table in docs/features.md)"
