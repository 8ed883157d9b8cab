#!/usr/bin/env python3
"""sbx-execd with 1 GiB: stdout streamed with backpressure, upload and download checksummed,
all with execd's RSS bounded (EXECD_BIG_MB changes the size)."""
import hashlib
import json
import os
import socket
import threading
import time
import urllib.parse

from harness import check, rss_kib, run_tests

MB = int(os.environ.get("EXECD_BIG_MB", "1024"))
RSS_GROWTH_KIB = 16 * 1024


class RssWatch:
    def __init__(self, pid):
        self.pid, self.peak, self.stop = pid, 0, False
        self.base = rss_kib(pid)
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop:
            self.peak = max(self.peak, rss_kib(self.pid))
            time.sleep(0.05)

    def check(self, what):
        self.stop = True
        self.t.join()
        growth = self.peak - self.base
        print("     %s: RSS %d KiB -> peak %d KiB" % (what, self.base, self.peak), flush=True)
        check(growth < RSS_GROWTH_KIB, "%s grew RSS by %d KiB" % (what, growth))


def connect(ex, head):
    s = socket.create_connection((ex.host, ex.port))
    if ex.token:
        head = head.replace(b"\r\n\r\n", b"\r\nX-EXECD-ACCESS-TOKEN: %s\r\n\r\n" %
                            ex.token.encode(), 1)
    s.sendall(head)
    return s


def test_stdout_1g(ex):
    gen = ("python3 -c \"import sys; w=sys.stdout.buffer.write; l=b'a'*1023+b'\\n'\n"
           "for _ in range(%d): w(l*1024)\"" % MB)
    body = json.dumps({"command": gen}).encode()
    s = connect(ex, b"POST /command HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" %
                (len(body), body))
    watch = RssWatch(ex.pid)
    time.sleep(2)  # a client that does not read: the command must block, not execd's memory
    total, events, tail, last, t0 = 0, 0, b"", b"", time.time()
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        total += len(chunk)
        buf = tail + chunk
        events += buf.count(b'"type":"stdout"') - tail.count(b'"type":"stdout"')
        tail = buf[-64:]
        last = buf[-300:]
        if b"0\r\n\r\n" in buf[-16:]:
            break
    s.close()
    dt = time.time() - t0
    print("     %d MiB of stdout as %d events in %.1fs (%.0f MB/s of output)" %
          (MB, events, dt, MB * 1.048576 / dt), flush=True)
    watch.check("1 GiB stdout")
    check(events == MB * 1024, "stdout events %d, want %d" % (events, MB * 1024))
    check(b'"type":"execution_complete"' in last, "no terminal event at the end: %r" % last)


def pattern_block(i):
    return hashlib.sha256(b"%d" % i).digest() * 32768  # 1 MiB, differs per block


def test_upload_download_1g(ex):
    path = os.path.join(ex.tmp, "big.bin")
    boundary = b"sbxBigBoundary7"
    pre = (b"--" + boundary + b'\r\nContent-Disposition: form-data; name="metadata"; '
           b'filename="metadata"\r\nContent-Type: application/json\r\n\r\n' +
           json.dumps({"path": path, "mode": 644}).encode() + b"\r\n--" + boundary +
           b'\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n'
           b"Content-Type: application/octet-stream\r\n\r\n")
    post = b"\r\n--" + boundary + b"--\r\n"
    length = len(pre) + MB * (1 << 20) + len(post)
    s = connect(ex, b"POST /files/upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data;"
                b" boundary=%s\r\nContent-Length: %d\r\n\r\n" % (boundary, length))
    watch = RssWatch(ex.pid)
    sha = hashlib.sha256()
    t0 = time.time()
    s.sendall(pre)
    for i in range(MB):
        b = pattern_block(i)
        sha.update(b)
        s.sendall(b)
    s.sendall(post)
    resp = s.recv(4096)
    s.close()
    dt = time.time() - t0
    print("     upload %d MiB in %.1fs (%.0f MB/s)" % (MB, dt, MB * 1.048576 / dt), flush=True)
    check(resp.startswith(b"HTTP/1.1 200"), "upload answer %r" % resp[:200])
    watch.check("1 GiB upload")
    check(os.path.getsize(path) == MB << 20, "uploaded size")
    watch = RssWatch(ex.pid)
    s = connect(ex, b"GET /files/download?path=%s HTTP/1.1\r\nHost: x\r\n\r\n" %
                urllib.parse.quote(path).encode())
    got = hashlib.sha256()
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, rest = buf.split(b"\r\n\r\n", 1)
    check(b"200 OK" in head and b"Content-Length: %d" % (MB << 20) in head, "head %r" % head)
    got.update(rest)
    n, t0 = len(rest), time.time()
    while n < MB << 20:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        got.update(chunk)
        n += len(chunk)
    s.close()
    dt = time.time() - t0
    print("     download %d MiB in %.1fs (%.0f MB/s)" % (MB, dt, MB * 1.048576 / dt), flush=True)
    watch.check("1 GiB download")
    check(n == MB << 20 and got.digest() == sha.digest(), "download checksum differs")
    os.unlink(path)


if __name__ == "__main__":
    # ASan keeps freed memory in a quarantine; keep it small so RSS shows real growth.
    os.environ["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=1"
    run_tests(local_only=True, tests=[test_stdout_1g, test_upload_download_1g])
