#!/usr/bin/env bash
# Quick sbx-execd numbers on loopback: POST /command `true` round trip (keep-alive, p50/p90),
# POST /code on a warm Python kernel (when one is available), and 1 GiB upload/download
# through curl, with execd's CPU time for each transfer.
#   bench/execd_bench.sh [build/release/sbx-execd] [DIR for the 1 GiB files, default /dev/shm]
set -euo pipefail
bin=${1:-build/release/sbx-execd}
dir=${2:-/dev/shm}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
work=$(mktemp -d "$dir/execd-bench.XXXXXX")
"$bin" --listen 127.0.0.1:"$port" --state-dir "$work/state" 2>/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
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
cpu() { awk '{print $14 + $15}' /proc/$pid/stat; }
head -c 1G /dev/urandom > "$work/src"
for i in 1 2 3; do
  a=$(cpu)
  curl -s -o /dev/null -w 'upload 1 GiB:   %{time_total}s  %{speed_upload} B/s' \
    -F "metadata={\"path\":\"$work/dst\"};type=application/json;filename=metadata" \
    -F "file=@$work/src" "http://127.0.0.1:$port/files/upload"
  echo "  execd cpu $(( ($(cpu) - a) * 10 )) ms"
done
for i in 1 2 3; do
  a=$(cpu)
  curl -s -o /dev/null -w 'download 1 GiB: %{time_total}s  %{speed_download} B/s' \
    "http://127.0.0.1:$port/files/download?path=$work/dst"
  echo "  execd cpu $(( ($(cpu) - a) * 10 )) ms"
done
cmp "$work/src" "$work/dst" && echo "content identical"
grep -E 'VmHWM' /proc/$pid/status
