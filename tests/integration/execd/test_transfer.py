#!/usr/bin/env python3
"""sbx-execd transfers of several page-cache windows (8 MiB, src/execd/pagecache.h).

Downloads of more than one window are streamed window by window: whole file, Ranges across
windows, keep-alive after them, a client that leaves mid-way (no fd kept). And the page cache a
transfer leaves behind on a disk file system: an upload's pages are dropped once they are on
the disk, a download drops the windows it read from the disk itself, and a file that was cached
before a download stays cached."""
import json
import os
import socket
import subprocess
import urllib.parse

from harness import check, fd_count, run_tests, wait_until

WINDOW = 8 << 20
Q = urllib.parse.quote


def d(ex, name):
    os.makedirs(os.path.join(ex.tmp, "t"), exist_ok=True)
    return os.path.join(ex.tmp, "t", name)


def resident(path):
    """Bytes of path in the page cache (fincore, util-linux)."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path],
                         check=True, capture_output=True, text=True).stdout
    return int(out.split()[0])


def uncache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def page_cache_testable(ex):
    """Why the page cache cannot be checked here, or None."""
    fs = subprocess.run(["stat", "-f", "-c", "%T", ex.tmp], capture_output=True,
                        text=True).stdout.strip()
    if fs in ("tmpfs", "ramfs"):
        return "the test dir is on %s (its pages are the file)" % fs
    if subprocess.run(["sh", "-c", "command -v fincore"], capture_output=True).returncode:
        return "no fincore (util-linux)"
    return None


def cachestat_kernel():
    """cachestat(2), which tells a download which windows were cached, is Linux 6.5+."""
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    return (major, minor) >= (6, 5)


def write_file(path, size):
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for i in range(size >> 20):
            f.write(block[:-1] + bytes([i % 251]))
        f.write(block[: size & ((1 << 20) - 1)])
    with open(path, "rb") as f:
        return f.read()


def get(c, ex, path, rng=None):
    h = ex.headers({"Range": rng} if rng else None)
    c.request("GET", "/files/download?path=" + Q(path), headers=h)
    r = c.getresponse()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()


def test_download_windows(ex):
    p = d(ex, "w.bin")
    size = 2 * WINDOW + 12345
    data = write_file(p, size)
    c = ex.conn()  # one kept-alive connection for all of it
    try:
        st, h, body = get(c, ex, p)
        check(st == 200 and body == data, "whole file: %d, %d bytes" % (st, len(body)))
        check(h.get("content-length") == str(size) and "transfer-encoding" not in h,
              "framing of a streamed download: %r" % h)
        for a, b in ((WINDOW - 100, 2 * WINDOW + 50), (100, size - 1), (WINDOW, 2 * WINDOW - 1),
                     (3, WINDOW + 2)):
            st, h, body = get(c, ex, p, "bytes=%d-%d" % (a, b))
            check(st == 206 and body == data[a:b + 1],
                  "range %d-%d: %d, %d bytes" % (a, b, st, len(body)))
            check(h["content-range"] == "bytes %d-%d/%d" % (a, b, size),
                  "content-range %r" % h["content-range"])
            check(h["content-length"] == str(b - a + 1), "content-length %r" % h)
        c.request("GET", "/ping", headers=ex.headers())
        r = c.getresponse()
        r.read()
        check(r.status == 200, "the connection is usable after streamed downloads")
    finally:
        c.close()


def test_download_client_gone(ex):
    """Clients that leave in the middle of a multi-window download leave no fd behind."""
    p = d(ex, "gone.bin")
    write_file(p, 4 * WINDOW)
    before = fd_count(ex.pid)
    head = "GET /files/download?path=%s HTTP/1.1\r\nHost: x\r\n" % Q(p)
    if ex.token:
        head += "X-EXECD-ACCESS-TOKEN: %s\r\n" % ex.token
    for _ in range(3):
        s = socket.create_connection((ex.host, ex.port))
        s.sendall((head + "\r\n").encode())
        got = 0
        while got < WINDOW + 1000:
            chunk = s.recv(1 << 20)
            check(chunk, "download ended early")
            got += len(chunk)
        s.close()
    wait_until(lambda: fd_count(ex.pid) <= before, 10, "execd to close the files and sockets")
    check(ex.request("GET", "/ping")[0] == 200, "daemon up")


def test_upload_leaves_no_cache(ex):
    why = page_cache_testable(ex)
    if why:
        print("skip test_upload_leaves_no_cache: " + why)
        return
    p = d(ex, "up.bin")
    data = os.urandom(3 * WINDOW + 777)
    boundary = "sbxTRANSFERx1"
    body = (b"--%s\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n%s\r\n"
            b"--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\r\n" %
            (boundary.encode(), json.dumps({"path": p}).encode(), boundary.encode()) +
            data + b"\r\n--%s--\r\n" % boundary.encode())
    st, _, out = ex.request("POST", "/files/upload", body,
                            {"Content-Type": "multipart/form-data; boundary=" + boundary})
    check(st == 200, "upload: %d %r" % (st, out[:200]))
    res = resident(p)
    print("     %d MiB uploaded: %d KiB of it in the page cache" % (len(data) >> 20, res >> 10))
    check(res < WINDOW, "an upload of %d bytes left %d bytes in the page cache" % (len(data), res))
    with open(p, "rb") as f:
        check(f.read() == data, "uploaded bytes differ")


def test_download_cache(ex):
    why = page_cache_testable(ex)
    if why:
        print("skip test_download_cache: " + why)
        return
    p = d(ex, "dl.bin")
    size = 6 * WINDOW + 4096
    data = write_file(p, size)  # read back: the whole file is cached now
    check(resident(p) == size, "the file is cached after reading it (%d)" % resident(p))
    st, _, body = ex.request("GET", "/files/download?path=" + Q(p))
    check(st == 200 and body == data, "hot download: %d" % st)
    check(resident(p) == size, "a download dropped a cached file (%d of %d bytes left)" %
          (resident(p), size))
    if not cachestat_kernel():
        print("skip the cold download: no cachestat(2) before Linux 6.5 (nothing is dropped)")
        return
    uncache(p)
    check(resident(p) < WINDOW, "fadvise dropped the file (%d)" % resident(p))
    st, _, body = ex.request("GET", "/files/download?path=" + Q(p))
    check(st == 200 and body == data, "cold download: %d" % st)
    res = resident(p)
    print("     cold download of %d MiB: %d KiB of it left in the page cache" %
          (size >> 20, res >> 10))
    # the windows still lent to the socket when they were sent may stay: at most two
    check(res <= 2 * WINDOW, "a cold download left %d of %d bytes cached" % (res, size))


if __name__ == "__main__":
    run_tests(local_only=True, tests=[test_download_windows, test_download_client_gone,
                                      test_upload_leaves_no_cache, test_download_cache])
