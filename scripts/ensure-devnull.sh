#!/usr/bin/env bash
# Makes /dev/null the null device again when it is not (or PATH, for the
# test: scripts/devnull_test.py).
#
# Some sandboxes start with /dev/null as a plain file. Everything written
# to it then stays there, and every read of it returns that text: a
# `cargo ... 2>/dev/null` fills it with compiler warnings, and cargo's own
# probe of the target (`rustc -`, its stdin opened on /dev/null) then
# compiles those warnings and fails ("unknown start of token" in `<anon>`).
# That is how a run's guest build failed, in CI and not here, until this
# machine's /dev/null was seen to be a plain file too.
#
# Needs root (mknod) when there is something to mend; says so otherwise.
set -euo pipefail
path="${1:-/dev/null}"
[ -c "$path" ] && exit 0
echo "== $path is not a character device ($(stat -c %F "$path" 2>/dev/null || echo missing)): making it the null device (1, 3)" >&2
tmp="$path.nodestatus-$$"
if mknod -m 666 "$tmp" c 1 3 && mv -f "$tmp" "$path"; then
  exit 0
fi
rm -f "$tmp" 2>/dev/null || true
# Without mknod (no CAP_MKNOD), empty it at least: what was written before
# cannot be read back, though what is written later still can.
if [ -f "$path" ] && : >"$path" 2>/dev/null; then
  echo "warning: $path could not be made the null device (mknod needs root and CAP_MKNOD): emptied it; reads of it may still return what is written to it later" >&2
  exit 0
fi
echo "error: $path is not the null device and could not be made one (mknod needs root)." >&2
echo "       Reads of it return what was written to it, and builds fail on that. As root: rm -f $path && mknod -m 666 $path c 1 3" >&2
exit 1
