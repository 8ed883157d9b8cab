#!/usr/bin/env bash
# The escape battery, run inside sandboxes by the static probe: every attempt must fail with
# the expected errno. Plus volume symlink escapes, checked from the host.
source "$(dirname "$0")/common.sh" "$@"
[[ -x $PROBE ]] || fail "probe binary missing: $PROBE"

mkdir -p "$TMP/probe"
cp "$PROBE" "$TMP/probe/probe"
# A file only the host can see: if any escape reached the host's root, the probe would open it.
marker=$TMP/host-only-marker
echo secret > "$marker"

echo "== host image, default settings"
"$SBX" run -v "$TMP/probe:/probe:ro" -- /probe/probe escape $$ "$marker"
echo "== as an unprivileged user"
"$SBX" run --user 65534:65534 -v "$TMP/probe:/probe:ro" -- /probe/probe escape $$ "$marker"
echo "== in a user namespace"
"$SBX" run --userns -v "$TMP/probe:/probe:ro" -- /probe/probe escape $$ "$marker"

echo "== a symlink inside a volume resolves inside the sandbox"
mkdir -p "$TMP/vol"
ln -s /etc/shadow "$TMP/vol/shadowlink"
ln -s "$marker" "$TMP/vol/markerlink"
out=$("$SBX" run -v "$TMP/vol:/vol" -- /bin/sh -c \
  'cat /vol/shadowlink 2>&1; cat /vol/markerlink 2>&1; true')
grep -q secret <<<"$out" && fail "volume symlink reached a host file: $out"
grep -q 'root:' <<<"$out" && fail "volume symlink read the host's /etc/shadow"
grep -q 'No such file' <<<"$out" || fail "unexpected: $out"
echo "ok volume symlinks stay inside"

echo "== a volume destination that is a symlink out of the root stays inside"
make_busybox_rootfs "$TMP/rootfs"
mkdir -p "$TMP/outside"
ln -s "$TMP/outside" "$TMP/rootfs/evil"
ln -s ../../../../../../../../tmp "$TMP/rootfs/evil2"
mkdir -p "$TMP/src"
echo payload > "$TMP/src/file"
set +e
"$SBX" run --rootfs "$TMP/rootfs" -v "$TMP/src:/evil" -- /bin/ls /evil >"$TMP/o1" 2>&1
"$SBX" run --rootfs "$TMP/rootfs" -v "$TMP/src:/evil2/x" -- /bin/cat /tmp/x/file >"$TMP/o2" 2>&1
rc2=$?
set -e
[[ -z $(ls -A "$TMP/outside") ]] || fail "bind landed in the host dir the symlink points to"
[[ ! -e /tmp/x ]] || fail "bind created /tmp/x on the host"
[[ $rc2 -eq 0 ]] && grep -q payload "$TMP/o2" || fail "relative symlink dst not resolved in root: $(cat "$TMP/o2")"
echo "ok symlinked volume destinations resolve inside the root ($(head -c 200 "$TMP/o1"))"
echo "PASS"
