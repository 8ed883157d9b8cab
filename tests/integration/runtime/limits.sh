#!/usr/bin/env bash
# cgroup limits: a memory bomb is OOM-killed inside the sandbox only (and reported as such), a
# fork bomb hits the pids limit, a CPU quota measurably throttles.
source "$(dirname "$0")/common.sh" "$@"
[[ -x $PROBE ]] || fail "probe binary missing: $PROBE"
mkdir -p "$TMP/probe"
cp "$PROBE" "$TMP/probe/probe"

echo "== memory bomb (64 MiB limit, 400 MiB wanted)"
set +e
# `tail` keeps the last "line" of /dev/zero in memory, and /dev/zero has no newline: it
# grows until something stops it.
timeout 60 "$SBX" run --memory 64m -- /usr/bin/tail /dev/zero >"$TMP/out" 2>"$TMP/err"
rc=$?
set -e
cat "$TMP/err"
[[ $rc -eq 137 ]] || fail "memory bomb: exit $rc, want 137"
grep -q 'sbx run: killed: out of memory (limit 64m)' "$TMP/err" || fail "OOM not reported"
echo "ok OOM-killed inside the sandbox; this test (pid $$) is alive"

echo "== fork bomb (pids 16)"
set +e
out=$("$SBX" run --pids 16 -v "$TMP/probe:/probe:ro" -- /probe/probe forkbomb 200 2>&1)
set -e
echo "$out"
procs=$(grep -o 'forked=[0-9]*' <<<"$out" | cut -d= -f2 || true)
[[ -n $procs ]] || fail "fork bomb: no count ($out)"
# 16 pids: sbx's init, the probe, and at most 14 children.
(( procs <= 14 )) || fail "fork bomb: $procs children, limit 16 pids"
grep -q 'errno=Resource temporarily unavailable' <<<"$out" || fail "no EAGAIN from fork"
echo "ok pids limit held at $procs"

echo "== fork bomb with the default pids limit (1024)"
set +e
out=$("$SBX" run -v "$TMP/probe:/probe:ro" -- /probe/probe forkbomb 3000 2>&1)
set -e
procs=$(grep -o 'forked=[0-9]*' <<<"$out" | cut -d= -f2 || true)
[[ -n $procs ]] && (( procs <= 1022 && procs > 900 )) ||
  fail "default pids limit: $procs children ($out)"
echo "ok default pids limit held at $procs"

echo "== cpu quota (0.2 CPU vs none)"
ratio() { "$SBX" run "$@" -v "$TMP/probe:/probe:ro" -- /probe/probe spin 1000 | awk '{printf "%d", $1 * 1000 / $2}'; }
free=$(ratio)
limited=$(ratio --cpus 0.2)
echo "cpu per wall (permille): unlimited $free, --cpus 0.2 $limited"
(( limited <= 350 )) || fail "--cpus 0.2 used $limited permille of a CPU"
(( free >= 2 * limited )) || fail "no measurable throttling: $free vs $limited"
echo "ok throttled"

settle || fail "records left behind"
echo "PASS"
