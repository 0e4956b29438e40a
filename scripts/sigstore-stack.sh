#!/usr/bin/env bash
# A private Sigstore on loopback, from the binaries scripts/ensure-sigstore.sh
# builds: MariaDB (Debian's), Trillian's log server and signer, Rekor v1,
# Fulcio with an ephemeral CA and no CT log, and a test OIDC issuer. For
# tests/all/keyless.rs and for the fixtures of crates/registry's keyless
# tests (crates/registry/tests/fixtures/keyless/make.sh).
#
#   scripts/sigstore-stack.sh start DIR    start everything under DIR (new, empty)
#   scripts/sigstore-stack.sh token DIR email|github FILE [CLAIMS-JSON]
#                                          mint an ID token into FILE
#   scripts/sigstore-stack.sh stop DIR     stop what start started (by pid)
#
# After `start`, DIR holds:
#   env                  FULCIO_URL, REKOR_URL, OIDC_URL (shell syntax)
#   trusted_root.json    Sigstore's trusted root of this Fulcio and this Rekor
#                        (application/vnd.dev.sigstore.trustedroot+json;version=0.1)
#   signing_config.json  cosign v3's --signing-config for them
#   pids, *.log
#
# The OIDC issuer (python3 with python3-cryptography) serves two issuers that
# Fulcio trusts: OIDC_URL/email (Fulcio's "email" type: the token's `email`
# becomes the certificate's subject) and OIDC_URL/github (Fulcio's
# "github-workflow" type: the token's GitHub claims become the certificate's
# 1.3.6.1.4.1.57264.1.* extensions). Tokens are ES256 JWTs, audience
# "sigstore", valid 10 minutes.
#
#   NODESTATUS_SIGSTORE  the directory of the binaries (default: what
#                        scripts/ensure-sigstore.sh prints)
set -euo pipefail
cmd="${1:-}"
dir="${2:-}"
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|token|stop DIR ..." >&2; exit 2; }
log() { printf '[sigstore-stack] %s\n' "$*" >&2; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_http() {
  local url="$1" what="$2" i
  # 60 s: a loaded machine (CI runs this beside the real-node suite).
  for i in $(seq 1 300); do
    curl -fsS -o /dev/null "$url" 2>/dev/null && return 0
    sleep 0.2
  done
  log "$what did not answer at $url; its log:"
  tail -n 30 "$dir/$what.log" >&2 || true
  return 1
}

start_bg() {
  local name="$1"; shift
  "$@" >"$dir/$name.log" 2>&1 &
  echo "$! $name" >>"$dir/pids"
}

case "$cmd" in
start)
  bin="${NODESTATUS_SIGSTORE:-$("$(dirname "$0")/ensure-sigstore.sh")}"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  : >"$dir/pids"
  # A start that fails stops what it started.
  trap 'log "the start failed: stopping what started"; "$0" stop "$dir"' ERR
  db_port=$(free_port); tl_rpc=$(free_port); tl_http=$(free_port); ts_rpc=$(free_port); ts_http=$(free_port)
  rekor_port=$(free_port); fulcio_port=$(free_port); fulcio_grpc=$(free_port); fulcio_metrics=$(free_port); oidc_port=$(free_port)

  # MariaDB, its own data directory and user (root may run it with --user).
  mariadb-install-db --no-defaults --datadir="$dir/db" --auth-root-authentication-method=normal \
    --user="$(id -un)" --skip-test-db >"$dir/mariadb-install.log" 2>&1
  start_bg mariadb mariadbd --no-defaults --datadir="$dir/db" --socket="$dir/mariadb.sock" \
    --port="$db_port" --bind-address=127.0.0.1 --user="$(id -un)" --skip-grant-tables --skip-name-resolve
  for i in $(seq 1 300); do
    mariadb --no-defaults -S "$dir/mariadb.sock" -e 'select 1' >/dev/null 2>&1 && break
    sleep 0.2
  done
  mariadb --no-defaults -S "$dir/mariadb.sock" -e 'create database trillian; create database rekor'
  mariadb --no-defaults -S "$dir/mariadb.sock" trillian <"$bin/trillian-storage.sql"
  dsn="root@tcp(127.0.0.1:$db_port)"

  start_bg trillian-server "$bin/trillian_log_server" --mysql_uri="$dsn/trillian" \
    --rpc_endpoint="127.0.0.1:$tl_rpc" --http_endpoint="127.0.0.1:$tl_http"
  start_bg trillian-signer "$bin/trillian_log_signer" --mysql_uri="$dsn/trillian" \
    --rpc_endpoint="127.0.0.1:$ts_rpc" --http_endpoint="127.0.0.1:$ts_http" \
    --force_master --sequencer_interval=100ms --batch_size=100
  wait_http "http://127.0.0.1:$tl_http/metrics" trillian-server

  # Rekor v1: creates its tree at start; an in-memory signing key; its
  # search index in MariaDB (no Redis).
  start_bg rekor "$bin/rekor-server" serve --trillian_log_server.address=127.0.0.1 \
    --trillian_log_server.port="$tl_rpc" --rekor_server.address=127.0.0.1 --port="$rekor_port" \
    --rekor_server.signer=memory --search_index.storage_provider=mysql \
    --search_index.mysql.dsn="$dsn/rekor" --enable_attestation_storage=false
  rekor="http://127.0.0.1:$rekor_port"
  wait_http "$rekor/api/v1/log/publicKey" rekor

  oidc="http://127.0.0.1:$oidc_port"
  python3 - "$dir" "$oidc_port" >"$dir/oidc-key.log" 2>&1 <<'EOF'
import sys
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import serialization
key = ec.generate_private_key(ec.SECP256R1())
open(sys.argv[1] + "/oidc-key.pem", "wb").write(key.private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
EOF
  start_bg oidc python3 "$(dirname "$0")/sigstore-oidc.py" serve "$dir/oidc-key.pem" "$oidc_port"
  wait_http "$oidc/email/.well-known/openid-configuration" oidc

  cat >"$dir/fulcio.json" <<EOF
{"OIDCIssuers": {
  "$oidc/email": {"IssuerURL": "$oidc/email", "ClientID": "sigstore", "Type": "email"},
  "$oidc/github": {"IssuerURL": "$oidc/github", "ClientID": "sigstore", "Type": "github-workflow"}
}}
EOF
  start_bg fulcio "$bin/fulcio" serve --ca=ephemeralca --ct-log-url= --config-path="$dir/fulcio.json" \
    --host=127.0.0.1 --port="$fulcio_port" --grpc-host=127.0.0.1 --grpc-port="$fulcio_grpc" \
    --metrics-port="$fulcio_metrics" --legacy-unix-domain-socket="$dir/fulcio-legacy.sock"
  fulcio="http://127.0.0.1:$fulcio_port"
  wait_http "$fulcio/api/v2/trustBundle" fulcio

  python3 "$(dirname "$0")/sigstore-oidc.py" root "$fulcio" "$rekor" >"$dir/trusted_root.json"
  cat >"$dir/signing_config.json" <<EOF
{"mediaType": "application/vnd.dev.sigstore.signingconfig.v0.2+json",
 "caUrls": [{"url": "$fulcio", "majorApiVersion": 1, "validFor": {"start": "2020-01-01T00:00:00Z"}, "operator": "local"}],
 "oidcUrls": [],
 "rekorTlogUrls": [{"url": "$rekor", "majorApiVersion": 1, "validFor": {"start": "2020-01-01T00:00:00Z"}, "operator": "local"}],
 "tsaUrls": [],
 "rekorTlogConfig": {"selector": "ANY"},
 "tsaConfig": {"selector": "ANY"}}
EOF
  printf 'FULCIO_URL=%s\nREKOR_URL=%s\nOIDC_URL=%s\n' "$fulcio" "$rekor" "$oidc" >"$dir/env"
  log "up: Fulcio $fulcio, Rekor $rekor, OIDC $oidc ($dir)"
  ;;
token)
  kind="${3:?email or github}"; out="${4:?the token file}"; claims="${5:-{\}}"
  . "$dir/env"
  python3 "$(dirname "$0")/sigstore-oidc.py" token "$dir/oidc-key.pem" "$OIDC_URL/$kind" "$claims" >"$out"
  ;;
stop)
  [ -f "$dir/pids" ] || exit 0
  # Fulcio and Rekor first, the database last; what is still there after
  # 5 s (Trillian's signer may wait on its database) is killed.
  pids=$(tac "$dir/pids" | cut -d' ' -f1)
  for pid in $pids; do kill "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 50); do
    alive=
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ -z "$alive" ] && break
    sleep 0.1
  done
  for pid in $pids; do kill -9 "$pid" 2>/dev/null || true; done
  rm -f "$dir/pids"
  ;;
*) echo "usage: $0 start|token|stop DIR ..." >&2; exit 2 ;;
esac
