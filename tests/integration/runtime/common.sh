# Shared setup for the runtime's integration tests (sourced). Usage in a test:
#   source "$(dirname "$0")/common.sh" "$@"      # $1 = sbx binary, $2 = probe binary
# Gives: $SBX $PROBE $TMP, SBX_STATE_DIR and SBX_CGROUP_PARENT unique to this test, fail(),
# and a cleanup trap (gc --all, cgroup parents, temp dir) that runs however the test ends.
set -euo pipefail
SBX=$1
PROBE=${2:-}
NAME=$(basename "$0" .sh)

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || skip "needs root"
unshare -m -p -n -u -i -f true 2>/dev/null || skip "cannot create namespaces here"
[[ -d /sys/fs/cgroup/memory || -f /sys/fs/cgroup/cgroup.controllers ]] || skip "no cgroups"

TMP=$(mktemp -d "/tmp/sbx-rt-$NAME.XXXXXX")
chmod 755 "$TMP"
export SBX_STATE_DIR=$TMP/state
export SBX_CGROUP_PARENT=sbx-test-$NAME-$$
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}

cleanup() {
  "$SBX" gc --all --state-dir "$SBX_STATE_DIR" >/dev/null 2>&1 || true
  # gc --all unmounts the records tmpfs; make sure even if gc failed.
  umount -l "$SBX_STATE_DIR/run" 2>/dev/null || true
  find /sys/fs/cgroup -mindepth 2 -maxdepth 6 -depth -type d -name "$SBX_CGROUP_PARENT" \
    -exec rmdir {} + 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT

# A BusyBox root filesystem (one static binary + applet symlinks), read-only lower layer.
make_busybox_rootfs() {
  local r=$1
  [[ -x /bin/busybox ]] || skip "busybox-static not installed"
  file -L /bin/busybox 2>/dev/null | grep -q 'statically linked' || \
    ldd /bin/busybox 2>&1 | grep -q 'not a dynamic' || skip "/bin/busybox is not static"
  mkdir -p "$r/bin" "$r/etc" "$r/tmp" "$r/root"
  cp /bin/busybox "$r/bin/busybox"
  for a in $(/bin/busybox --list); do
    [[ -e $r/bin/$a ]] || ln -s busybox "$r/bin/$a"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nalice:x:1234:4321::/tmp:/bin/sh\n' > "$r/etc/passwd"
  printf 'root:x:0:\nstaff:x:4321:\n' > "$r/etc/group"
  chmod 1777 "$r/tmp"
}

# Count the sandbox dirs in the state dir (0 when it does not exist yet).
count_records() { ls -A "$SBX_STATE_DIR/run" 2>/dev/null | wc -l; }

# `sbx run` exits once the command's status is known and leaves the teardown (the init's
# exit, cgroups, lease, record; the record last) to a detached process: wait for it, up to
# 20 s, before checking what is left. Returns 1 if records remain.
settle() {
  local end=$((SECONDS + 20))
  until [[ $(count_records) -eq 0 ]]; do (( SECONDS < end )) || return 1; sleep 0.02; done
}
