#!/usr/bin/env bash
# A real kubelet node on this machine: containerd 1.6 with runc and a CNI
# bridge, and the kubelet (1.37.2 by default) from the same Go module build as
# the apiserver (scripts/ensure-apiserver.sh), on cgroup v1 with
# `failCgroupV1: false`. The recipe, and the workarounds it needs on this kind
# of VM, are in docs/real-node.md.
#
#   scripts/real-node.sh prepare
#       Installs the Debian packages (scripts/ensure-packages.sh: under the
#       apt lock of the other set-up scripts) and builds the pause and busybox
#       images once, cached in $NODESTATUS_CACHE/real-node (default
#       ~/.cache/nodestatus/real-node). Prints the cache directory.
#   scripts/real-node.sh up DIR KUBECONFIG NODE
#       Starts containerd (its root, state, socket and CNI config all under
#       DIR) with the images imported, and the kubelet (root dir DIR/kubelet)
#       as NODE with KUBECONFIG, and waits for the kubelet's healthz. The
#       kubelet's root dir and containerd's root share the node's disk,
#       DIR/disk: a 4g tmpfs unless NODESTATUS_NODE_FS=host
#       (NODESTATUS_NODE_FS_SIZE sizes it). A node left behind by a run that
#       was killed is torn down first.
#   scripts/real-node.sh import DIR TAR...
#       Imports docker-archive tars into containerd's k8s.io namespace.
#   scripts/real-node.sh ctr DIR ARGS...
#       Runs `ctr -n k8s.io ARGS` against this node's containerd.
#   scripts/real-node.sh down DIR
#       Stops the kubelet, every container and sandbox, and containerd;
#       unmounts everything under DIR; removes the CNI bridge, the pods' log
#       directories and the kubelet's empty cgroups. Fails if a mount is left
#       under DIR (then DIR must not be removed recursively).
#
# Root only: containerd, runc and the kubelet need it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${NODESTATUS_CACHE:-$HOME/.cache/nodestatus}"
images="$cache/real-node"
k8s_version="${NODESTATUS_K8S_VERSION:-1.37.2}"
# The kubelet beside the apiserver that the tests run ($NODESTATUS_APISERVER).
bindir="$(dirname "${NODESTATUS_APISERVER:-$cache/k8s-$k8s_version/bin/kube-apiserver}")"
pause_src="$bindir/../src/pause.c"
# The sandbox image, as kubeadm 1.37 names it.
pause_image=registry.k8s.io/pause:3.10.2
# The bridge has its own name, so that teardown removes only what this
# script made.
bridge=nodestatus0
subnet=10.88.0.0/16
last=/run/nodestatus-real-node.last
# Bump when the image recipe changes; cached images with another one are rebuilt.
recipe="pause-3.10.2-from-k8s-$k8s_version busybox-static buildah-vfs timestamp-0 v1"
pkgs=(containerd runc containernetworking-plugins busybox-static buildah iptables conntrack socat ethtool gcc libc6-dev)

log() { printf '[real-node] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (containerd, runc and the kubelet need it)"

prepare() {
  # apt under the set-up scripts' lock, `apt-get update` only when needed.
  "$here/ensure-packages.sh" "${pkgs[@]}"
  [ -x "$bindir/kubelet" ] || die "no kubelet in $bindir: run scripts/ensure-apiserver.sh first"
  mkdir -p "$images"
  if [ -f "$images/pause.tar" ] && [ -f "$images/busybox.tar" ] \
     && [ "$(cat "$images/.recipe" 2>/dev/null)" = "$recipe" ]; then
    echo "$images"; return
  fi
  # shellcheck source=real-node/oci.sh
  . "$here/real-node/oci.sh"
  local t; t="$(mktemp -d /tmp/nodestatus-images.XXXXXX)"
  trap 'rm -rf "$t"' RETURN
  [ -f "$pause_src" ] \
    || die "no $pause_src: scripts/ensure-apiserver.sh copies it from the k8s.io/kubernetes module"
  log "building the pause image (gcc -static of Kubernetes' own pause.c)"
  mkdir -p "$t/pause"
  gcc -Os -Wall -Werror -static -DVERSION=v3.10.2-nodestatus -o "$t/pause/pause" "$pause_src"
  strip "$t/pause/pause"
  oci_image "$t/pause" "$pause_image" "$images/pause.tar" \
    --entrypoint '["/pause"]' --user 65535:65535
  log "building the busybox image (busybox-static)"
  mkdir -p "$t/busybox/bin" "$t/busybox/tmp"
  cp /bin/busybox "$t/busybox/bin/busybox"
  local a
  for a in $(/bin/busybox --list); do
    [ "$a" = busybox ] || ln -sf busybox "$t/busybox/bin/$a"
  done
  chmod 1777 "$t/busybox/tmp"
  oci_image "$t/busybox" busybox:latest "$images/busybox.tar" \
    --cmd '["/bin/sh"]' --env PATH=/bin
  echo "$recipe" > "$images/.recipe"
  echo "$images"
}

ctr_() { local dir="$1"; shift; ctr --address "$dir/containerd/containerd.sock" -n k8s.io "$@"; }

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Sends TERM to the process in pid file $1, then KILL after $2 seconds.
stop_pid() {
  local pidfile="$1" wait="${2:-15}" pid i
  alive "$pidfile" || { rm -f "$pidfile"; return 0; }
  pid="$(cat "$pidfile")"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < wait * 10; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    log "pid $pid did not stop on TERM in ${wait}s: KILL"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$pidfile"
}

wait_for() { # wait_for SECONDS WHAT CMD...
  local secs="$1" what="$2" i
  shift 2
  for ((i = 0; i < secs * 4; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
  return 1
}

mounts_under() { # mount points under $1, deepest first
  awk -v d="$1/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | awk '{ print length($0) " " $0 }' | sort -rn | cut -d' ' -f2-
}

write_containerd_config() {
  local dir="$1" c="$1/containerd"
  mkdir -p "$dir/disk/containerd" "$c/state" "$c/opt" "$dir/cni/net.d" "$dir/cni/ipam"
  containerd config default | sed \
    -e "s|^root = \"/var/lib/containerd\"|root = \"$dir/disk/containerd\"|" \
    -e "s|^state = \"/run/containerd\"|state = \"$c/state\"|" \
    -e "s|^  address = \"/run/containerd/containerd.sock\"|  address = \"$c/containerd.sock\"|" \
    -e "s|sandbox_image = \".*\"|sandbox_image = \"$pause_image\"|" \
    -e "s|bin_dir = \"/opt/cni/bin\"|bin_dir = \"/usr/lib/cni\"|" \
    -e "s|conf_dir = \"/etc/cni/net.d\"|conf_dir = \"$dir/cni/net.d\"|" \
    -e "s|SystemdCgroup = true|SystemdCgroup = false|" \
    -e "s|restrict_oom_score_adj = false|restrict_oom_score_adj = true|" \
    -e "s|netns_mounts_under_state_dir = false|netns_mounts_under_state_dir = true|" \
    -e "s|path = \"/opt/containerd\"|path = \"$c/opt\"|" \
    > "$c/config.toml"
  grep -q "restrict_oom_score_adj = true" "$c/config.toml" || die "containerd's default config changed: restrict_oom_score_adj not set"
  grep -q "netns_mounts_under_state_dir = true" "$c/config.toml" || die "containerd's default config changed: netns_mounts_under_state_dir not set"
  grep -q "address = \"$c/containerd.sock\"" "$c/config.toml" || die "containerd's default config changed: grpc address not set"
  # No ipMasq: the pods here need no traffic beyond the node, and the bridge
  # plugin then adds no iptables rules that a killed run could leave behind.
  cat > "$dir/cni/net.d/10-nodestatus.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "nodestatus-realnode",
  "plugins": [
    {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false,
     "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$dir/cni/ipam",
              "ranges": [[{"subnet": "$subnet"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}

write_kubelet_config() {
  local dir="$1"
  cat > "$dir/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$dir/containerd/containerd.sock
# containerd 1.6 has no RuntimeConfig call: the kubelet falls back to this.
cgroupDriver: cgroupfs
# This machine has cgroup v1: kubelet 1.35 and later refuse it unless told.
failCgroupV1: false
failSwapOn: false
readOnlyPort: 0
# A test VM only: anonymous access to the kubelet's API, on loopback.
address: 127.0.0.1
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
# An unchanged status is posted every minute (default 5m), so that a test
# window of a few minutes sees several of the kubelet's status writes.
nodeStatusReportFrequency: 1m
# The host's iptables are left alone (no KUBE-* chains to clean up).
makeIPTablesUtilChains: false
# The kubelet's hard eviction thresholds are its defaults (nodefs.available
# 10%, nodefs.inodesFree 5%, imagefs.available 15%, memory.available 100Mi):
# nodefs and imagefs are the node's own disk (see the up function).
EOF
}

up() {
  local dir="$1" kubeconfig="$2" node="$3"
  [ -f "$kubeconfig" ] || die "no kubeconfig at $kubeconfig"
  [ -d /sys/fs/cgroup/memory ] || [ -f /sys/fs/cgroup/cgroup.controllers ] || die "no cgroup hierarchy under /sys/fs/cgroup"
  prepare >/dev/null
  if [ -f "$last" ] && [ "$(cat "$last")" != "$dir" ] && [ -d "$(cat "$last")" ]; then
    stale="$(cat "$last")"
    log "tearing down the node left by an earlier run in $stale"
    if down "$stale"; then
      rm -rf "$stale"
    else
      log "the earlier node's teardown failed; going on"
    fi
  fi
  if ip link show "$bridge" >/dev/null 2>&1; then ip link del "$bridge"; fi
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  echo "$dir" > "$last"
  cp "$kubeconfig" "$dir/kubelet.kubeconfig"
  # What the kubelet adds to /var/log/pods and /var/log/containers is
  # removed by `down`: remember what was there.
  mkdir -p /var/log/pods /var/log/containers
  ls -A /var/log/pods /var/log/containers > "$dir/varlog-before" 2>/dev/null || true
  # The kubelet makes /var/lib/kubelet/device-plugins whatever its root
  # dir (a path compiled in): remove it after, if it was not there before.
  [ -e /var/lib/kubelet ] || touch "$dir/made-var-lib-kubelet"

  # The node's disk: the kubelet's root dir (nodefs) and containerd's root
  # (imagefs) on one filesystem of its own, a tmpfs, as on a node whose
  # /var/lib is one partition. The kubelet's eviction thresholds (its
  # defaults: DiskPressure below 10% free on nodefs or 15% on imagefs, then
  # evictions and image GC) then depend on what the node holds, not on how
  # full the build machine's disk is. NODESTATUS_NODE_FS=host keeps it on
  # DIR's filesystem.
  mkdir -p "$dir/disk" "$dir/kubelet"
  if [ "${NODESTATUS_NODE_FS:-tmpfs}" = tmpfs ]; then
    mount -t tmpfs -o "size=${NODESTATUS_NODE_FS_SIZE:-4g},mode=0755" nodestatus-node "$dir/disk"
  fi
  mkdir -p "$dir/disk/kubelet"
  mount --bind "$dir/disk/kubelet" "$dir/kubelet"
  write_containerd_config "$dir"
  log "starting containerd (log: $dir/containerd.log)"
  setsid containerd --config "$dir/containerd/config.toml" </dev/null >"$dir/containerd.log" 2>&1 &
  echo $! > "$dir/containerd.pid"
  wait_for 30 containerd ctr_ "$dir" version \
    || { tail -20 "$dir/containerd.log" >&2; die "containerd did not answer on $dir/containerd/containerd.sock"; }
  import "$dir" "$images/pause.tar" "$images/busybox.tar"

  write_kubelet_config "$dir"
  log "starting the kubelet as $node (log: $dir/kubelet.log)"
  setsid "$bindir/kubelet" \
    --config="$dir/kubelet-config.yaml" \
    --kubeconfig="$dir/kubelet.kubeconfig" \
    --hostname-override="$node" \
    --root-dir="$dir/kubelet" \
    --cert-dir="$dir/kubelet/pki" \
    </dev/null >"$dir/kubelet.log" 2>&1 &
  echo $! > "$dir/kubelet.pid"
  if ! wait_for 60 kubelet curl -sf http://127.0.0.1:10248/healthz; then
    tail -30 "$dir/kubelet.log" >&2
    alive "$dir/kubelet.pid" || die "the kubelet exited"
    die "the kubelet's healthz did not answer within 60 s"
  fi
  log "up: containerd and the kubelet run"
}

import() {
  local dir="$1" t
  shift
  for t in "$@"; do
    ctr_ "$dir" images import "$t" >&2 || die "importing $t failed"
  done
}

down() {
  local dir="$1" ok=0 ids id p m
  [ -d "$dir" ] || { log "$dir does not exist: nothing to tear down"; return 0; }
  dir="$(cd "$dir" && pwd)"
  stop_pid "$dir/kubelet.pid" 20
  if alive "$dir/containerd.pid"; then
    # Every container, sandboxes (pause) included, then the containers.
    ids="$(ctr_ "$dir" tasks ls -q 2>/dev/null || true)"
    for id in $ids; do ctr_ "$dir" tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true; done
    for id in $ids; do
      for _ in $(seq 50); do
        ctr_ "$dir" tasks delete "$id" >/dev/null 2>&1 && break
        ctr_ "$dir" tasks ls -q 2>/dev/null | grep -qx "$id" || break
        sleep 0.1
      done
    done
    for id in $(ctr_ "$dir" containers ls -q 2>/dev/null || true); do
      ctr_ "$dir" containers delete "$id" >/dev/null 2>&1 || true
    done
  fi
  stop_pid "$dir/containerd.pid" 15
  # Shims outlive containerd: end those of this containerd, by pid.
  for p in /proc/[0-9]*; do
    if tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -q "containerd-shim.*$dir/containerd/containerd.sock"; then
      kill -KILL "${p#/proc/}" 2>/dev/null || true
    fi
  done
  # The kubelet's root dir bound on itself, the pods' tmpfs volumes, the
  # containers' rootfs overlays, the sandboxes' shm and netns.
  for m in $(mounts_under "$dir"); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "cannot unmount $m"
  done
  if ip link show "$bridge" >/dev/null 2>&1; then ip link del "$bridge" || true; fi
  # The kubelet's QoS cgroups, now empty (rmdir fails on a busy one).
  for m in /sys/fs/cgroup/*/kubepods; do
    [ -d "$m" ] && find "$m" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  if [ -f "$dir/varlog-before" ]; then
    for p in /var/log/pods/* /var/log/containers/*; do
      [ -e "$p" ] || [ -L "$p" ] || continue
      grep -qx "$(basename "$p")" "$dir/varlog-before" || rm -rf "$p"
    done
  fi
  if [ -f "$dir/made-var-lib-kubelet" ] && [ -z "$(mounts_under /var/lib/kubelet)" ]; then
    rm -rf /var/lib/kubelet
  fi
  if [ "$(cat "$last" 2>/dev/null)" = "$dir" ]; then rm -f "$last"; fi
  if [ -n "$(mounts_under "$dir")" ]; then
    log "mounts are left under $dir:"; mounts_under "$dir" >&2; ok=1
  else
    # Images and snapshots (hundreds of MB) tell nothing after the run; the
    # logs and configs stay.
    rm -rf "$dir/disk" "$dir/containerd/state"
  fi
  return $ok
}

cmd="${1:-}"
shift || true
case "$cmd" in
  prepare) prepare ;;
  up) [ $# -eq 3 ] || die "usage: $0 up DIR KUBECONFIG NODE"; up "$@" ;;
  import) [ $# -ge 2 ] || die "usage: $0 import DIR TAR..."; import "$@" ;;
  ctr) [ $# -ge 1 ] || die "usage: $0 ctr DIR ARGS..."; d="$1"; shift; ctr_ "$d" "$@" ;;
  down) [ $# -eq 1 ] || die "usage: $0 down DIR"; down "$1" && log "down: $1" ;;
  *) die "usage: $0 prepare | up DIR KUBECONFIG NODE | import DIR TAR... | ctr DIR ARGS... | down DIR" ;;
esac
