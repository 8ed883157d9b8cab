#!/usr/bin/env bash
# Quick sbx-execd numbers on loopback: POST /command `true` round trip (keep-alive, p50/p90),
# POST /code on a warm Python kernel (when one is available), and 1 GiB upload/download
# through curl into each DIR, with execd's and curl's CPU time for each transfer.
#   bench/execd_bench.sh [build/release/sbx-execd] [DIR...]
# DIRs default to /var/tmp (a disk file system: the upload is fsynced, a download after it reads
# the disk) and /dev/shm (tmpfs: no disk, the file lives in memory). The 1 GiB source file is
# made in the first DIR. docs/execd.md ("Speed") says how to read the numbers.
set -euo pipefail
bin=${1:-build/release/sbx-execd}
shift || true
dirs=("$@")
[[ ${#dirs[@]} -gt 0 ]] || dirs=(/var/tmp /dev/shm)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
work=$(mktemp -d "${dirs[0]}/execd-bench.XXXXXX")
dsts=()
"$bin" --listen 127.0.0.1:"$port" --state-dir "$work/state" 2>/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work" "${dsts[@]}"' EXIT
sleep 0.3
python3 - "$port" <<'PY'
import json, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
body = json.dumps({"command": "true"}).encode()
req = b"POST /command HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
ts = []
for _ in range(2000):
    t = time.perf_counter()
    s.sendall(req)
    buf = b""
    while not buf.endswith(b"0\r\n\r\n"):
        buf += s.recv(65536)
    ts.append(time.perf_counter() - t)
ts.sort()
print("POST /command true: p50 %.3f ms  p90 %.3f ms  p99 %.3f ms" %
      (ts[1000] * 1e3, ts[1800] * 1e3, ts[1980] * 1e3))
PY
# POST /code on a warm python context (round trip of `1`), and a context's kernel start.
python3 - "$port" <<'PY'
import http.client, json, sys, time
port = int(sys.argv[1])
def req(method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request(method, path, body=json.dumps(body) if body is not None else None)
    r = c.getresponse()
    return r.status, r.read()
t = time.perf_counter()
st, data = req("POST", "/code/context", {"language": "python"})
if st != 200:
    print("POST /code: no kernel here (%s)" % json.loads(data)["message"][:120])
    sys.exit(0)
print("python context (kernel start to ready): %.0f ms" % ((time.perf_counter() - t) * 1e3))
ctx = json.loads(data)
ts = []
for _ in range(300):
    t = time.perf_counter()
    st, data = req("POST", "/code", {"context": ctx, "code": "1"})
    ts.append(time.perf_counter() - t)
ts.sort()
print("POST /code 1 (warm kernel): p50 %.3f ms  p90 %.3f ms" % (ts[150] * 1e3, ts[270] * 1e3))
PY
tick=$(getconf CLK_TCK)
cpu() { awk -v t="$tick" '{printf "%d %d\n", $14 * 1000 / t, $15 * 1000 / t}' /proc/$pid/stat; }
# one transfer: curl's speed, execd's user/sys CPU and curl's own user/sys CPU in ms
transfer() {
  local a b speed ct
  read -r -a a < <(cpu)
  ct=$( { TIMEFORMAT='%3U %3S'; time curl -s -o /dev/null -w "%{$1}" "${@:2}" >"$work/speed"; } 2>&1)
  read -r -a b < <(cpu)
  speed=$(cat "$work/speed")
  awk -v s="$speed" -v eu=$((b[0] - a[0])) -v es=$((b[1] - a[1])) -v c="$ct" 'BEGIN {
    split(c, cc, " ");
    printf "%5.0f MB/s   execd CPU %4d ms (user %3d, sys %4d)   curl CPU %4.0f ms\n",
      s / 1e6, eu + es, eu, es, (cc[1] + cc[2]) * 1000 }'
}
head -c 1G /dev/urandom >"$work/src"
for dir in "${dirs[@]}"; do
  dst=$(mktemp -d "$dir/execd-bench-dst.XXXXXX")
  dsts+=("$dst")
  fs=$(findmnt -n -o FSTYPE -T "$dir" 2>/dev/null | head -1 || stat -f -c %T "$dir")
  echo "1 GiB to $dir ($fs):"
  for i in 1 2 3; do
    printf '  upload   '
    transfer speed_upload \
      -F "metadata={\"path\":\"$dst/f\"};type=application/json;filename=metadata" \
      -F "file=@$work/src" "http://127.0.0.1:$port/files/upload"
  done
  for i in 1 2 3; do
    printf '  download '
    transfer speed_download "http://127.0.0.1:$port/files/download?path=$dst/f"
  done
  cmp "$work/src" "$dst/f" && echo "  content identical"
  rm -rf "$dst"
done
grep -E 'VmHWM' /proc/$pid/status
