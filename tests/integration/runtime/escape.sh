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

echo "== the init holds nothing of the caller's (read from the host, as root)"
SBX_TEST_SECRET="s3cr3t-$$" "$SBX" run -- sleep 20 </dev/null >/dev/null 2>&1 &
runpid=$!
initpid=""
for _ in $(seq 200); do
  rec=$(ls "$SBX_STATE_DIR"/run/*/state.json 2>/dev/null | head -1 || true)
  [[ -n $rec ]] && initpid=$(grep -o '"pid": *[0-9]*' "$rec" | grep -o '[0-9]*$' || true)
  [[ -n $initpid && $initpid != 0 && -r /proc/$initpid/cmdline ]] &&
    [[ $(tr '\0' ' ' </proc/"$initpid"/cmdline) == sbx-init* ]] && break
  sleep 0.05
done
[[ -n $initpid ]] || fail "no init pid in the record"
cmdline=$(tr '\0' ' ' </proc/"$initpid"/cmdline)
[[ $cmdline == sbx-init* ]] || fail "the init's cmdline shows the caller's: $cmdline"
grep -aq "s3cr3t-$$" /proc/"$initpid"/environ && fail "the init's environ holds the caller's"
grep -aq "s3cr3t-$$" /proc/"$initpid"/cmdline && fail "the init's cmdline holds the secret"
grep -q '^NoNewPrivs:[[:space:]]*1' /proc/"$initpid"/status || fail "init without no_new_privs"
grep -q '^Seccomp:[[:space:]]*2' /proc/"$initpid"/status || fail "init without a seccomp filter"
# control: the caller itself does hold it (the check above can see a secret where there is one)
grep -aq "s3cr3t-$$" /proc/"$runpid"/environ || fail "control: the caller's environ"
kill "$runpid" 2>/dev/null || true
wait "$runpid" 2>/dev/null || true
echo "ok the init is sbx-init with an empty environment, filtered, no_new_privs"

echo "== the caller's stdio: no host inode can be changed through it"
mode_null=$(stat -c %a /dev/null)
set +e
# the mode it has already: refused where the boundary holds, harmless to the host where not
"$SBX" run -- chmod "$mode_null" /proc/self/fd/0 </dev/null >"$TMP/o-null" 2>&1
rc=$?
set -e
[[ $(stat -c %a /dev/null) == "$mode_null" ]] || { chmod "$mode_null" /dev/null; fail "host /dev/null changed"; }
[[ $rc -ne 0 ]] && grep -q 'Read-only file system' "$TMP/o-null" ||
  fail "chmod of a stdin /dev/null: rc $rc $(cat "$TMP/o-null")"
echo before >"$TMP/out"
chmod 644 "$TMP/out"
"$SBX" run -- sh -c 'chmod 4755 /proc/self/fd/1 /proc/self/fd/2; echo out; echo err >&2' \
  >>"$TMP/out" 2>&1 </dev/null
[[ $(stat -c %a "$TMP/out") == 644 ]] || fail "a stdout file was chmod'ed: $(stat -c %a "$TMP/out")"
[[ $(cat "$TMP/out") == $'before\nout\nerr' ]] || fail "stdout file content: $(cat "$TMP/out")"
printf 'in1\nin2\n' >"$TMP/in"
chmod 644 "$TMP/in"
got=$("$SBX" run -- sh -c 'chmod 4755 /proc/self/fd/0 2>/dev/null; cat' <"$TMP/in")
[[ $(stat -c %a "$TMP/in") == 644 ]] || fail "a stdin file was chmod'ed"
[[ $got == $'in1\nin2' ]] || fail "stdin file content: $got"
# a terminal: still a terminal inside, its inode out of reach
script -qec "$SBX run -- sh -c 'test -t 0 && test -t 1 && echo IS-A-TTY; chmod 000 /proc/self/fd/0'" \
  /dev/null >"$TMP/o-tty" 2>&1 </dev/null || true
grep -q IS-A-TTY "$TMP/o-tty" || fail "a terminal stays a terminal: $(cat "$TMP/o-tty")"
grep -q 'Read-only file system' "$TMP/o-tty" || fail "chmod of a terminal: $(cat "$TMP/o-tty")"
echo "ok stdio: /dev/null, files and terminals reach the command, their inodes do not"

echo "== the host image exposes no secrets of /etc"
keymark=/etc/ssl/private/sbx-escape-test-$$.key
if [[ -d /etc/ssl/private ]]; then
  echo "marker-private-key" >"$keymark"
  trap 'rm -f "$keymark"; cleanup' EXIT
fi
out=$("$SBX" run -- sh -c 'cat /etc/ssl/private/*.key 2>&1; ls /etc/ssl; ls /etc/shadow /etc/ssh 2>&1;
  test -r /etc/ssl/certs/ca-certificates.crt && echo CA-READABLE; true')
rm -f "$keymark"
grep -q marker-private-key <<<"$out" && fail "a host TLS key is readable in the host image"
grep -qx private <<<"$out" && fail "/etc/ssl/private is in the host image: $out"
grep -q CA-READABLE <<<"$out" || fail "the CA bundle is missing: $out"
grep -q "cannot access '/etc/shadow'" <<<"$out" && grep -q "cannot access '/etc/ssh'" <<<"$out" ||
  fail "/etc/shadow or /etc/ssh in the host image: $out"
echo "ok no /etc/ssl/private, no shadow, no ssh keys; CA certificates readable"

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
