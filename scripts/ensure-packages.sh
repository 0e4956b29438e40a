#!/usr/bin/env bash
# Installs the Debian packages named on the command line that are missing,
# with apt-get under the same lock as the other set-up scripts (they may run
# side by side). Tries the machine's current package lists first, and runs
# `apt-get update` only when that fails.
#
#   scripts/ensure-packages.sh protobuf-compiler containerd
#
# The packages the build and the tests need, and why:
#   protobuf-compiler  protoc, for k8s-cri's build script (the CRI client)
#   containerd         the real container runtime that tests/all/cri.rs starts
#   docker-registry    the real OCI registry (distribution 2.8) that crates/registry's tests start
#   apache2-utils      htpasswd, for that registry's bcrypt password file
#   openssl            the CA, certificates and keys those tests make
set -euo pipefail
missing=()
for pkg in "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
echo "== apt-get install ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt() { "${sudo[@]}" flock /tmp/nodestatus-apt.lock apt-get "$@" >&2; }
apt install -y -qq --no-install-recommends "${missing[@]}" ||
  { apt update -qq && apt install -y -qq --no-install-recommends "${missing[@]}"; }
