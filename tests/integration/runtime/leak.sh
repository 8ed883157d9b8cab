#!/usr/bin/env bash
# Nothing left behind: mounts, cgroup dirs, network namespaces (processes holding them), and
# state records and disk-backed writable layers are the same before and after 100 sandboxes.
source "$(dirname "$0")/common.sh" "$@"
marker=SBX_LEAK_MARKER_$$

our_mounts() { grep -c -e "$TMP" -e "sbx-rt-" /proc/self/mountinfo || true; }
our_cgroups() { find /sys/fs/cgroup -mindepth 2 -maxdepth 8 -type d -path "*/$SBX_CGROUP_PARENT/*" 2>/dev/null | wc -l; }
# A netns lives only as long as a process, an open fd or an nsfs mount holds it. sbx never
# bind-mounts one; so count nsfs mounts below our dirs, and processes that carry this test's
# marker. (Machine-wide counts are printed, not compared: other tests run concurrently.)
nsfs_mounts() { grep ' nsfs ' /proc/self/mountinfo | grep -c "$TMP" || true; }
marked_procs() { grep -l "$marker" /proc/[0-9]*/environ 2>/dev/null | wc -l; }
netns_count() { find /proc/[0-9]*/ns/net -printf '%l\n' 2>/dev/null | sort -u | wc -l; }
layers() { ls -A "$SBX_STATE_DIR/upper" 2>/dev/null | wc -l; }
snapshot() { echo "mounts=$(our_mounts) cgroups=$(our_cgroups) nsfs=$(nsfs_mounts) procs=$(marked_procs) records=$(count_records) layers=$(layers)"; }

mkdir -p "$TMP/vol"
"$SBX" run -- /bin/true   # creates the cgroup parents and the host image once
settle || fail "the first sandbox's record was not removed"
before=$(snapshot)
echo "before: $before (machine-wide netns: $(netns_count), mountinfo lines: $(wc -l </proc/self/mountinfo))"
for i in $(seq 100); do
  case $((i % 4)) in
    0) "$SBX" run -e "$marker=1" -- /bin/true ;;
    1) "$SBX" run --upper disk -e "$marker=1" --memory 64m --pids 32 --cpus 0.5 -- /bin/sh -c 'exit 0' ;;
    2) "$SBX" run -e "$marker=1" -v "$TMP/vol:/vol" -- /bin/sh -c 'echo x > /vol/f' ;;
    3) "$SBX" run --upper disk -e "$marker=1" --userns -- /bin/sh -c 'sleep 0 & wait' ;;
  esac
done
settle || true   # the last runs' detached teardowns (the record goes last)
after=$(snapshot)
echo "after:  $after (machine-wide netns: $(netns_count), mountinfo lines: $(wc -l </proc/self/mountinfo))"
[[ "$before" == "$after" ]] || fail "leak: before [$before] after [$after]"
[[ $(marked_procs) -eq 0 ]] || fail "sandbox processes still running"
echo "PASS"
