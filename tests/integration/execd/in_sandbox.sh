#!/usr/bin/env bash
# The static sbx-execd inside a real native sandbox whose root is a bare BusyBox (no glibc,
# no bash): the whole command suite (test_commands.py) runs against it over HTTP.
#   in_sandbox.sh SBX EXECD_STATIC PYTHON TEST_COMMANDS_PY
set -uo pipefail
sbx=$1 execd=$2 py=$3 suite=$4
[[ $(id -u) -eq 0 ]] || { echo "skip: needs root"; exit 77; }
[[ -x /bin/busybox ]] || { echo "skip: busybox-static not installed"; exit 77; }
t=$(mktemp -d /tmp/sbx-execd-sandbox-XXXXXX)
root=$t/root
mkdir -p "$root/bin" "$root/tmp" "$root/etc" "$root/usr" "$root/.sbx"
cp /bin/busybox "$root/bin/busybox"
for a in $(/bin/busybox --list); do [[ $a == busybox ]] || ln -sf busybox "$root/bin/$a"; done
echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
echo 'root:x:0:' > "$root/etc/group"
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$sbx" run --state-dir "$t/state" --rootfs "$root" --network host -v "$execd:/.sbx/execd:ro" \
    -- /.sbx/execd --listen "127.0.0.1:$port" >"$t/log" 2>&1 &
pid=$!
cleanup() {
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    "$sbx" gc --all --state-dir "$t/state" >/dev/null 2>&1
    rm -rf "$t"
}
trap cleanup EXIT
[[ ${KEEP:-} ]] && trap - EXIT
for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$port/ping" >/dev/null && break
    kill -0 "$pid" 2>/dev/null || { echo "execd in the sandbox died:"; cat "$t/log"; exit 1; }
    sleep 0.1
done
# The daemon really runs in the sandbox: its root has no glibc.
curl -fsS -X POST "http://127.0.0.1:$port/command" -d '{"command":"ls /lib* 2>&1 | head -1"}' |
    grep -q "No such file" || { echo "FAIL: execd does not run in the BusyBox root"; exit 1; }
EXECD_URL="http://127.0.0.1:$port" "$py" "$suite" "$execd"
