#!/usr/bin/env bash
# kill -9 of `sbx run` (settled and mid-setup): the sandbox dies with it (PDEATHSIG on its
# init), and what is left on the host (record, cgroups) is exactly what `sbx gc` removes.
# gc without --all leaves a live sandbox alone. Half the runs keep their writable layer on disk
# (--upper disk): gc removes those layers too, and layers whose record is gone (a reboot empties
# the records tmpfs).
source "$(dirname "$0")/common.sh" "$@"
marker=SBX_CRASH_MARKER_$$
export ASAN_OPTIONS=detect_leaks=0   # the sbx processes are SIGKILLed on purpose

our_cgroups() { find /sys/fs/cgroup -mindepth 2 -maxdepth 8 -type d -path "*/$SBX_CGROUP_PARENT/*" 2>/dev/null | wc -l; }
marked_procs() { grep -l "$marker" /proc/[0-9]*/environ 2>/dev/null | wc -l; }
wait_for() { # wait_for SECONDS CMD...: poll until CMD succeeds
  local end=$((SECONDS + $1)); shift
  until "$@"; do (( SECONDS < end )) || return 1; sleep 0.05; done
}
layers() { ls -A "$SBX_STATE_DIR/upper" 2>/dev/null | wc -l; }
sandbox_running() { [[ $(marked_procs) -ge 1 ]]; }
no_sandbox() { [[ $(marked_procs) -eq 0 ]]; }

echo "== kill -9 of a settled sbx run"
"$SBX" run --upper disk -e "$marker=1" --memory 64m --pids 64 -- /bin/sleep 100 &
sbx_pid=$!
wait_for 10 sandbox_running || fail "sandbox did not start"
kill -9 "$sbx_pid"
wait "$sbx_pid" 2>/dev/null || true
wait_for 5 no_sandbox || fail "the sandbox survived its sbx run"
[[ $(count_records) -eq 1 ]] || fail "expected 1 record left, got $(count_records)"
(( $(our_cgroups) >= 1 )) || fail "expected the cgroups to be left"
[[ $(layers) -eq 1 ]] || fail "expected the disk layer to be left, got $(layers)"
out=$("$SBX" gc)
echo "$out"
grep -q 'removed 1 sandbox,' <<<"$out" || fail "gc: $out"
[[ $(count_records) -eq 0 && $(our_cgroups) -eq 0 ]] || fail "gc left records or cgroups"
[[ $(layers) -eq 0 ]] || fail "gc left the disk layer"

echo "== kill -9 in mid-setup, 30 times at different moments"
for i in $(seq 30); do
  upper=tmpfs; (( i % 2 )) && upper=disk
  "$SBX" run --upper $upper -e "$marker=1" --memory 64m --pids 64 -- /bin/sleep 100 &
  pid=$!
  sleep "0.00$((i % 10))"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
done
wait_for 10 no_sandbox || fail "sandboxes survived their sbx run"
echo "left before gc: records=$(count_records) cgroups=$(our_cgroups)"
"$SBX" gc
[[ $(count_records) -eq 0 ]] || fail "gc left records: $(ls "$SBX_STATE_DIR/run")"
[[ $(our_cgroups) -eq 0 ]] || fail "gc left cgroups"
[[ $(layers) -eq 0 ]] || fail "gc left disk layers: $(ls "$SBX_STATE_DIR/upper")"

echo "== a layer whose record is gone (the records tmpfs is empty after a reboot)"
mkdir -p "$SBX_STATE_DIR/upper/sbx-orphan/upper/etc"
echo x > "$SBX_STATE_DIR/upper/sbx-orphan/upper/etc/f"
"$SBX" gc >/dev/null
[[ ! -e $SBX_STATE_DIR/upper/sbx-orphan ]] || fail "gc left an orphaned layer"

echo "== a record whose removal was cut short (its remover killed between rename and rm)"
# the teardown renames a record to .gone-<id>.<pid> before removing it: gc finishes one whose
# remover is gone, and leaves one whose remover runs
sleep 100 & live=$!
mkdir -p "$SBX_STATE_DIR/run/.gone-sbx-dead.999999/x" "$SBX_STATE_DIR/run/.gone-sbx-live.$live"
"$SBX" gc >/dev/null
[[ ! -e $SBX_STATE_DIR/run/.gone-sbx-dead.999999 ]] || fail "gc left a cut-short removal"
[[ -e $SBX_STATE_DIR/run/.gone-sbx-live.$live ]] || fail "gc took a removal in progress"
kill "$live"; wait "$live" 2>/dev/null || true
"$SBX" gc >/dev/null
[[ ! -e $SBX_STATE_DIR/run/.gone-sbx-live.$live ]] || fail "gc left it once its remover died"

echo "== gc leaves a live sandbox alone"
"$SBX" run -e "$marker=1" --memory 64m --pids 64 -- /bin/sleep 100 &
sbx_pid=$!
wait_for 10 sandbox_running || fail "sandbox did not start"
wait_for 5 test -f "$(ls -d "$SBX_STATE_DIR"/run/*/ | head -1)state.json" || fail "no record"
out=$("$SBX" gc)
grep -q '1 still running' <<<"$out" || fail "gc: $out"
sandbox_running || fail "gc killed a live sandbox"
kill -TERM "$sbx_pid"   # forwarded to the command: sleep dies, sbx run exits 143
set +e; wait "$sbx_pid"; rc=$?; set -e
[[ $rc -eq 143 ]] || fail "SIGTERM forwarding: exit $rc, want 143"
settle || fail "records left: $(ls "$SBX_STATE_DIR/run")"
[[ $(our_cgroups) -eq 0 ]] || fail "cgroups left"
echo "PASS"
