# Sourced by scripts/real-node.sh and scripts/build-image.sh: a container
# image from a directory tree, with no registry and no base image.
#
#   oci_image ROOTFS TAG OUT_TAR [buildah config flags...]
#
# buildah runs on a private, throw-away store (vfs driver, under a temp
# directory), so nothing is left in /var/lib/containers and no overlay mount
# outlives the build. The image is committed with `--timestamp 0`, so that the
# same tree gives the same image ID, and pushed as a docker-archive tar that
# `ctr -n k8s.io images import` takes, with TAG as its only name.

oci_image() {
  local rootfs="$1" tag="$2" out="$3"
  shift 3
  local store ctr mnt
  store="$(mktemp -d /tmp/nodestatus-buildah.XXXXXX)"
  local b=(buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs)
  # The trap does not outlive the function: the store goes on every exit path.
  (
    set -euo pipefail
    trap 'rm -rf "$store"' EXIT
    ctr="$("${b[@]}" from --quiet scratch)"
    mnt="$("${b[@]}" mount "$ctr")"
    cp -a "$rootfs"/. "$mnt"/
    "${b[@]}" umount "$ctr" >/dev/null
    "${b[@]}" config "$@" "$ctr"
    "${b[@]}" commit --quiet --timestamp 0 "$ctr" "$tag" >/dev/null
    rm -f "$out.tmp"
    "${b[@]}" push --quiet "$tag" "docker-archive:$out.tmp:$tag"
    "${b[@]}" rm "$ctr" >/dev/null
    mv "$out.tmp" "$out"
  )
}
