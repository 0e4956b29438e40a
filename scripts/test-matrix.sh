#!/usr/bin/env bash
# The Kubernetes version matrix: the suites that talk to a real control plane
# or kubelet, run on each release nodestatus claims, one release at a time.
#
#   scripts/test-matrix.sh [RELEASE ...]     (default: every release below)
#   scripts/test-matrix.sh --suites api,faults 1.36.3
#
# For each release it builds (once, cached in ~/.cache/nodestatus/k8s-<v>/)
# that release's kube-apiserver, kube-controller-manager, kube-scheduler,
# kubelet, kubectl and its etcd from their Go modules
# (scripts/ensure-apiserver.sh), then runs on them:
#   api       tests/all's real-apiserver modules: register, sync, lease, the
#             patch semantics and generated patches, the kubelet fields by
#             the server's version (kube::), the ServiceAccount variant with
#             its ValidatingAdmissionPolicy (admission::), the watch-list
#             (watch_list::), the process's restarts, outage and shutdown
#             (process::)
#   faults    the fault rig (tests/faults: every scenario, with that
#             release's node lifecycle controller)
#   realnode  the real-node suite beside that release's own kubelet
#             (tests/realnode; root; field-by-field parity)
# and appends one line per suite to docs/matrix/results.tsv: release, suite,
# result (passed, failed or skipped), tests passed, tests failed, seconds,
# date (UTC), commit (with "+dirty" for a tree with changes), load (the
# 1-minute load average at the start), and a note. A suite that did not run
# is "skipped" with why, never "passed". scripts/matrix-table.py writes
# README.md's version table from that file (the latest line of each release
# and suite); `scripts/matrix-table.py --check` (in the test command) fails
# when README.md is not what the file gives.
#
# The test binaries are built once, before the first release (cargo test
# --workspace --no-run). Each suite's output is kept in
# target/matrix/<release>/<suite>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
log() { printf '\n== %s\n' "$*" >&2; }

all_releases=(1.32.13 1.33.13 1.34.4 1.35.4 1.36.3 1.37.2 1.38.0-beta.0)
suites=api,faults,realnode
releases=()
while [ $# -gt 0 ]; do
  case "$1" in
    --suites) suites="$2"; shift 2 ;;
    --suites=*) suites="${1#*=}"; shift ;;
    -h | --help) sed -n '2,33p' "$0"; exit 0 ;;
    -*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    *) releases+=("$1"); shift ;;
  esac
done
[ ${#releases[@]} -gt 0 ] || releases=("${all_releases[@]}")
for r in "${releases[@]}"; do
  printf '%s\n' "${all_releases[@]}" | grep -qx -- "$r" ||
    { echo "release $r is not in the matrix (${all_releases[*]})" >&2; exit 2; }
done
IFS=, read -r -a suite_list <<<"$suites"
for s in "${suite_list[@]}"; do
  case "$s" in api | faults | realnode) ;; *) echo "unknown suite $s (api, faults, realnode)" >&2; exit 2 ;; esac
done

results=docs/matrix/results.tsv
mkdir -p docs/matrix target/matrix
[ -f "$results" ] ||
  printf 'release\tsuite\tresult\tpassed\tfailed\tseconds\tdate\tcommit\tload\tnote\n' >"$results"
commit="$(git rev-parse --short=12 HEAD)"
git diff --quiet HEAD -- . ':!docs/matrix' || commit="$commit+dirty"

log "building the test binaries (cargo test --workspace --no-run)"
cargo test --workspace --no-run
cargo test --workspace --test realnode --no-run --message-format=json-render-diagnostics >target/matrix/build.json
realnode_bin="$(python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "realnode" and m.get("executable"):
        print(m["executable"])
' <target/matrix/build.json | tail -n 1)"

# Sums cargo's "test result:" lines of a log: "<passed> <failed>".
counts() {
  python3 - "$1" <<'EOF'
import re, sys
p = f = 0
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"test result: \w+\. (\d+) passed; (\d+) failed", line)
    if m:
        p += int(m.group(1)); f += int(m.group(2))
print(p, f)
EOF
}

record() { # release suite result passed failed seconds load note
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" \
    "$(date -u +%Y-%m-%dT%H:%MZ)" "$commit" "$7" "$8" >>"$results"
  log "$1 $2: $3 ($4 passed, $5 failed, $6 s)${8:+: $8}"
}

status=0
for release in "${releases[@]}"; do
  out="target/matrix/$release"
  mkdir -p "$out"
  log "Kubernetes $release: building its control plane and kubelet (cached after the first time; log $out/build.log)"
  if ! bin="$(NODESTATUS_K8S_VERSION="$release" scripts/ensure-apiserver.sh 2>"$out/build.log" | tail -n 1)" || [ ! -x "$bin" ]; then
    for s in "${suite_list[@]}"; do
      record "$release" "$s" skipped 0 0 0 "$(cut -d' ' -f1 /proc/loadavg)" "its build failed: $(grep -m1 -iE 'error|cannot|fail' "$out/build.log" | cut -c1-160)"
    done
    status=1
    continue
  fi
  bindir="$(dirname "$bin")"
  for s in "${suite_list[@]}"; do
    load="$(cut -d' ' -f1 /proc/loadavg)"
    start=$(date +%s)
    note=""
    case "$s" in
      api) cmd=(cargo test --workspace --test all -- kube:: admission:: watch_list:: process::) ;;
      faults) cmd=(cargo test --workspace --test faults) ;;
      realnode)
        if [ "$(id -u)" != 0 ]; then
          record "$release" "$s" skipped 0 0 0 "$load" "needs root"
          continue
        fi
        cmd=("$realnode_bin")
        ;;
    esac
    if NODESTATUS_APISERVER="$bin" NODESTATUS_K8S_VERSION="$release" PATH="$bindir:$PATH" \
      "${cmd[@]}" >"$out/$s.log" 2>&1; then
      result=passed
    else
      result=failed
      status=1
      note="$(grep -m1 -E '^test .* FAILED$|panicked at' "$out/$s.log" | cut -c1-160 || true)"
    fi
    read -r passed failed < <(counts "$out/$s.log")
    if [ "$result" = passed ] && [ "$passed" = 0 ]; then
      result=skipped
      note="$(grep -m1 -E 'ignored|skip' "$out/$s.log" | cut -c1-160 || echo 'no test ran')"
    fi
    record "$release" "$s" "$result" "$passed" "$failed" "$(($(date +%s) - start))" "$load" "$note"
  done
done
python3 scripts/matrix-table.py
exit $status
