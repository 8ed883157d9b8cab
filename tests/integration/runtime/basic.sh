#!/usr/bin/env bash
# sbx run end to end: host image and a BusyBox rootfs run, exit codes and signals propagate,
# options reach the sandbox, stdio passes through, isolation basics hold, nothing is left.
source "$(dirname "$0")/common.sh" "$@"

expect_eq() { [[ "$1" == "$2" ]] || fail "$3: got [$1] want [$2]"; }
run_rc() { set +e; "$@" >"$TMP/out" 2>"$TMP/err"; rc=$?; set -e; }

expect_eq "$("$SBX" run -- /bin/sh -c 'echo hi')" "hi" "host image echo"
run_rc "$SBX" run -- /bin/sh -c 'exit 3';              expect_eq "$rc" 3 "exit 3"
run_rc "$SBX" run -- /bin/sh -c 'kill -9 $$';          expect_eq "$rc" 137 "kill -9"
run_rc "$SBX" run -- /bin/sh -c 'kill -TERM $$';       expect_eq "$rc" 143 "kill -TERM"
run_rc "$SBX" run -- /no/such/cmd
expect_eq "$rc" 127 "missing command"
grep -q 'exec `/no/such/cmd`: No such file or directory' "$TMP/err" || fail "exec error: $(cat "$TMP/err")"

# Options.
expect_eq "$("$SBX" run -e FOO=bar -e PATH=/usr/bin:/bin -- /bin/sh -c 'echo $FOO:$PATH')" \
  "bar:/usr/bin:/bin" "env"
expect_eq "$("$SBX" run -w /tmp -- /bin/pwd)" "/tmp" "workdir"
expect_eq "$("$SBX" run --hostname box1 -- /bin/sh -c 'hostname; cat /etc/hostname' | tr '\n' ' ')" \
  "box1 box1 " "hostname"
expect_eq "$("$SBX" run --user 65534:65533 -- /bin/sh -c 'echo $(id -u):$(id -g)')" "65534:65533" "user"
expect_eq "$("$SBX" run --user nobody -- /usr/bin/id -un)" "nobody" "user by name"
expect_eq "$(echo abc | "$SBX" run -- /bin/cat)" "abc" "stdin passthrough"

# Isolation basics: own pid namespace (the command is pid 2 under sbx's init), only lo.
expect_eq "$("$SBX" run -- /bin/sh -c 'echo $$')" "2" "pid namespace"
expect_eq "$("$SBX" run -- /bin/ls /sys/class/net)" "lo" "network none"
expect_eq "$("$SBX" run -- /bin/cat /sys/class/net/lo/operstate)" "unknown" "lo is up"
# Host network: the interface of the host's default route is visible (other tests create and
# delete veths concurrently, so the whole list is not compared).
host_if=$(awk '$2 == "00000000" {print $1; exit}' /proc/net/route)
host_if=${host_if:-$(ls /sys/class/net | grep -v '^lo$' | head -1)}
[[ -n $host_if ]] || fail "the host has no interface but lo"
"$SBX" run --network host -- /bin/ls /sys/class/net | grep -qx "$host_if" || fail "network host: no $host_if"
"$SBX" run -- /bin/ls /sys/class/net | grep -qx "$host_if" && fail "network none: $host_if visible"
[[ ! -e /etc/shadow ]] || run_rc "$SBX" run -- /bin/cat /etc/shadow
[[ ! -e /etc/shadow ]] || expect_eq "$rc" 1 "no /etc/shadow in the host image"
# Orphans are reaped by sbx's init: no zombie remains.
expect_eq "$("$SBX" run -- /bin/sh -c '(/bin/true &); sleep 0.3; cat /proc/[0-9]*/stat | awk "{print \$3}" | grep -c Z || true')" \
  "0" "zombie reaping"

# Volumes: rw writes reach the host, ro refuses writes.
mkdir -p "$TMP/vol"
"$SBX" run -v "$TMP/vol:/data" -- /bin/sh -c 'echo written > /data/f'
expect_eq "$(cat "$TMP/vol/f")" "written" "rw volume"
run_rc "$SBX" run -v "$TMP/vol:/data:ro" -- /bin/sh -c 'echo x > /data/g'
[[ $rc -ne 0 ]] && grep -q 'Read-only file system' "$TMP/err" || fail "ro volume writable"
[[ ! -e $TMP/vol/g ]] || fail "ro volume: file created"

# The writable layer is private: a write to /usr is refused, /etc changes do not reach the host.
run_rc "$SBX" run -- /bin/sh -c 'echo x > /usr/sbx-test'
[[ $rc -ne 0 && ! -e /usr/sbx-test ]] || fail "/usr is writable"
"$SBX" run -- /bin/sh -c 'echo changed > /etc/hosts'
grep -q changed /etc/hosts && fail "/etc/hosts change reached the host"

# An image that is not in the store answers clearly (pulling and bridge: native.sh).
run_rc "$SBX" run --image alpine -- /bin/true
expect_eq "$rc" 125 "image rc"; grep -q 'alpine' "$TMP/err" || fail "image msg"

# The writable layer on disk (--upper disk): it lives under <state>/upper/<id> while the
# sandbox runs, more than the memory limit can be written to it (page cache, not RAM: a tmpfs
# layer would OOM-kill), and it is gone afterwards. The default (tmpfs) is a RAM mount in the
# sandbox's own namespace: nothing appears under <state>/upper.
expect_eq "$("$SBX" run --upper disk -- /bin/sh -c 'echo hi > /tmp/f; cat /tmp/f')" "hi" "disk layer"
"$SBX" run --upper disk --hostname diskbox -- /bin/sh -c \
  'echo marker > /root/m; sleep 0.5' & disk_pid=$!
wait_for_marker() {
  for _ in $(seq 50); do
    compgen -G "$SBX_STATE_DIR/upper/*/upper/root/m" >/dev/null && return 0; sleep 0.05
  done
  return 1
}
wait_for_marker || fail "disk layer: /root/m not under $SBX_STATE_DIR/upper/<id>/upper"
wait "$disk_pid" || fail "disk layer sandbox failed"
settle || fail "the disk layer sandbox's record was not removed"
expect_eq "$(ls -A "$SBX_STATE_DIR/upper")" "" "disk layer removed after the run"
"$SBX" run --upper disk --memory 64m -- /bin/sh -c \
  'dd if=/dev/zero of=/tmp/big bs=1M count=160 2>/dev/null && ls -l /tmp/big' >"$TMP/out" \
  || fail "160 MiB written to a disk layer with a 64m memory limit"
grep -q 167772160 "$TMP/out" || fail "disk layer big file: $(cat "$TMP/out")"
"$SBX" run --upper tmpfs -- /bin/sh -c 'echo x > /tmp/f'
settle || fail "records left behind"
expect_eq "$(ls -A "$SBX_STATE_DIR/upper")" "" "tmpfs layer: nothing on disk"
"$SBX" run --upper disk --userns -- /bin/sh -c 'echo u > /tmp/f && id -u' >"$TMP/out"
expect_eq "$(cat "$TMP/out")" "0" "disk layer in a user namespace"
run_rc "$SBX" run --upper ram -- /bin/true; expect_eq "$rc" 2 "--upper ram is a usage error"

# A user namespace: root inside is an unprivileged id outside.
expect_eq "$("$SBX" run --userns -- /bin/sh -c 'id -u; cat /proc/self/uid_map' | tr -s ' \n' ' ')" \
  "0 0 1000000 65536 " "userns"

# BusyBox root filesystem.
make_busybox_rootfs "$TMP/rootfs"
expect_eq "$("$SBX" run --rootfs "$TMP/rootfs" -- /bin/sh -c 'echo bb; ls /usr 2>&1 >/dev/null | head -c 2')" \
  "bb
ls" "busybox rootfs"
expect_eq "$("$SBX" run --rootfs "$TMP/rootfs" --user alice -- /bin/id -u)" "1234" "busybox user"
run_rc "$SBX" run --rootfs "$TMP/rootfs" -- /bin/sh -c 'exit 42'; expect_eq "$rc" 42 "busybox exit"
"$SBX" run --rootfs "$TMP/rootfs" -- /bin/sh -c 'echo x > /bin/new'
[[ ! -e $TMP/rootfs/bin/new ]] || fail "rootfs lower layer was written"

# A setup failure is sbx's (125), not the command's.
run_rc "$SBX" run -v /nonexistent-$$:/x -- /bin/true
expect_eq "$rc" 125 "setup failure"
grep -q 'volume source `/nonexistent' "$TMP/err" || fail "setup failure message: $(cat "$TMP/err")"

# The file systems a sandbox gets: each is a superblock on the host, and every new memory
# cgroup pays ~1 KiB per 64 superblocks the host has held at once (docs/server.md "Many
# sandboxes"), so the count per sandbox is kept down. Visible: overlay root, proc, /dev's tmpfs
# (with /dev/shm in it), devpts, mqueue, sysfs, one read-only tmpfs for every masked directory.
# Not visible: the writable layer's tmpfs (under the overlay). Host ones (binds) excluded.
"$SBX" run -m 64m -- /bin/sh -c 'cat /proc/self/mountinfo' >"$TMP/mi"
host_devs=$(awk '{print $3}' /proc/self/mountinfo | sort -u)
own=$(awk '{print $3, $9}' "$TMP/mi" | sort -u | awk 'NR == FNR {h[$1] = 1; next} !($1 in h)' \
  <(printf '%s\n' "$host_devs") - | sort -u)
expect_eq "$(awk '{print $2}' <<<"$own" | sort | tr '\n' ' ')" \
  "devpts mqueue overlay proc sysfs tmpfs tmpfs " "the sandbox's own file systems: $own"
masks=$(awk '$5 == "/proc/acpi" || $5 == "/sys/firmware" {print $3}' "$TMP/mi" | sort -u | wc -l)
[[ $(awk '$5 == "/proc/acpi" || $5 == "/sys/firmware"' "$TMP/mi" | wc -l) -lt 2 ]] ||
  expect_eq "$masks" 1 "the masked directories share one tmpfs"
"$SBX" run -m 64m -- /bin/sh -c 'stat -c %a /dev/shm; df -k /dev/shm | awk "NR == 2 {print \$2}";
  echo x >/dev/shm/f && cat /dev/shm/f; ls -A /proc/acpi /sys/firmware 2>/dev/null | grep -v -e : -e "^$";
  touch /proc/acpi/x 2>&1 | grep -o "Read-only file system"; echo ok >/dev/null && echo null' \
  >"$TMP/out" 2>&1
expect_eq "$(tr '\n' ' ' <"$TMP/out")" "1777 32768 x Read-only file system null " \
  "/dev/shm (sticky, half the limit), masks empty and read-only, device nodes work"

# Usage errors are exit 2 and never start anything.
for bad in "--cpus abc" "--cpus 0" "--memory 12x" "--pids -1" "--network foo" "-v nocolon" \
           "-v /a:relative" "-v /a:/b:rx" "-e NOEQUALS" "-w relative" "--no-such-option"; do
  run_rc "$SBX" run $bad -- /bin/true
  expect_eq "$rc" 2 "usage error for [$bad]"
done
run_rc "$SBX" run; expect_eq "$rc" 2 "no command"
run_rc "$SBX" run --rootfs /tmp --image x -- /bin/true; expect_eq "$rc" 2 "--rootfs with --image"
run_rc "$SBX" run --user no-such-user -- /bin/true; expect_eq "$rc" 2 "unknown user"
"$SBX" run --help | grep -q 'Usage: sbx run' || fail "run --help"
"$SBX" gc --help | grep -q 'Usage: sbx gc' || fail "gc --help"

settle || true
expect_eq "$(count_records)" 0 "state records left behind"
echo "PASS"
