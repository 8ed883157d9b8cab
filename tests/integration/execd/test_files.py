#!/usr/bin/env python3
"""sbx-execd files endpoints: info, remove, permissions, mv, search, replace, upload
(multipart pairs, temp file + rename, 413), download (whole, Range 206/416, line slices),
directories."""
import grp
import json
import os
import pwd
import socket
import stat
import subprocess
import urllib.parse

from harness import check, run_tests, wait_until

Q = urllib.parse.quote


def multipart(pairs, boundary="sbxBOUNDARYx42", meta_filename=True):
    """pairs: [(metadata dict or raw bytes, file bytes)] -> (body, content type)."""
    out = []
    for meta, data in pairs:
        m = meta if isinstance(meta, bytes) else json.dumps(meta).encode()
        fn = b'; filename="metadata"' if meta_filename else b""
        out.append(b"--" + boundary.encode() + b"\r\nContent-Disposition: form-data; "
                   b'name="metadata"' + fn + b"\r\nContent-Type: application/json\r\n\r\n" +
                   m + b"\r\n")
        if data is not None:
            out.append(b"--" + boundary.encode() + b"\r\nContent-Disposition: form-data; "
                       b'name="file"; filename="f.bin"\r\n'
                       b"Content-Type: application/octet-stream\r\n\r\n" + data + b"\r\n")
    out.append(b"--" + boundary.encode() + b"--\r\n")
    return b"".join(out), "multipart/form-data; boundary=" + boundary


def upload(ex, pairs, **kw):
    body, ct = multipart(pairs, **kw)
    return ex.request("POST", "/files/upload", body, {"Content-Type": ct})


def d(ex, *parts):
    p = os.path.join(ex.tmp, "files", *parts)
    return p


def test_upload_and_info(ex):
    os.makedirs(d(ex), exist_ok=True)
    data = bytes(range(256)) * 100 + b"\r\n--sbxBOUNDARYx4" + b"\r\n--sbx"  # near-boundary bytes
    st, _, body = upload(ex, [({"path": d(ex, "new", "a.bin"), "mode": 640}, data),
                              ({"path": d(ex, "b.txt"), "owner": None, "group": None},
                               b"hello\n")])
    check(st == 200 and body == b"", "upload: %d %r" % (st, body))
    with open(d(ex, "new", "a.bin"), "rb") as f:
        check(f.read() == data, "uploaded bytes differ")
    check(stat.S_IMODE(os.stat(d(ex, "new", "a.bin")).st_mode) == 0o640, "mode 640 not applied")
    check(not [n for n in os.listdir(d(ex, "new")) if n.startswith(".sbx-upload")],
          "temp file left behind")
    q = "/files/info?path=%s&path=%s" % (Q(d(ex, "new", "a.bin")), Q(d(ex, "new")))
    info = ex.json("GET", q)
    a = info[d(ex, "new", "a.bin")]
    check(a["type"] == "file" and a["size"] == len(data) and a["mode"] == 640, "info %r" % a)
    check(a["owner"] == pwd.getpwuid(os.getuid()).pw_name, "owner %r" % a["owner"])
    check(a["group"] == grp.getgrgid(os.getgid()).gr_name, "group %r" % a["group"])
    check(a["modified_at"].endswith("Z") and "T" in a["created_at"], "times %r" % a)
    check(info[d(ex, "new")]["type"] == "directory", "dir type")
    st, _, body = ex.request("GET", "/files/info?path=" + Q(d(ex, "missing")))
    check(st == 404 and json.loads(body)["code"] == "FILE_NOT_FOUND", "missing info %d" % st)
    st, _, body = ex.request("GET", "/files/info")
    check(st == 400 and json.loads(body)["code"] == "MISSING_QUERY", "no path %d" % st)


def test_upload_errors(ex):
    os.makedirs(d(ex), exist_ok=True)
    # metadata without file
    st, _, body = upload(ex, [({"path": d(ex, "x1")}, None)])
    check(st == 400 and json.loads(body)["code"] == "INVALID_FILE_CONTENT", "no file %r" % body)
    # bad metadata JSON
    st, _, body = upload(ex, [(b"{nope", b"data")])
    check(st == 400 and json.loads(body)["code"] == "INVALID_FILE_METADATA", "bad meta %r" % body)
    # relative path
    st, _, body = upload(ex, [({"path": "rel/x"}, b"data")])
    check(st == 400, "relative upload path %d" % st)
    # metadata part without filename is accepted too (COMPAT 2.5)
    st, _, body = upload(ex, [({"path": d(ex, "nofn")}, b"xyz")], meta_filename=False)
    check(st == 200 and open(d(ex, "nofn"), "rb").read() == b"xyz", "metadata without filename")
    # not multipart / truncated multipart
    st, _, body = ex.request("POST", "/files/upload", b"abc", {"Content-Type": "text/plain"})
    check(st == 400 and json.loads(body)["code"] == "INVALID_FILE", "not multipart %d" % st)
    b, ct = multipart([({"path": d(ex, "trunc")}, b"x" * 1000)])
    st, _, body = ex.request("POST", "/files/upload", b[:-40], {"Content-Type": ct})
    check(st == 400 and not os.path.exists(d(ex, "trunc")), "truncated multipart %d" % st)
    check(not [n for n in os.listdir(d(ex)) if n.startswith(".sbx-upload")], "temp file left")
    # the connection is still usable (keep-alive) after an upload
    c = ex.conn()
    for i in range(3):
        b, ct = multipart([({"path": d(ex, "ka%d" % i)}, b"k" * i)])
        c.request("POST", "/files/upload", b, ex.headers({"Content-Type": ct}))
        r = c.getresponse()
        r.read()
        check(r.status == 200, "keep-alive upload %d: %d" % (i, r.status))
        c.request("GET", "/ping", headers=ex.headers())
        r = c.getresponse()
        r.read()
        check(r.status == 200, "ping after upload on the same connection")
    c.close()


def test_upload_chunked(ex):
    os.makedirs(d(ex), exist_ok=True)
    body, ct = multipart([({"path": d(ex, "chunked.bin")}, b"C" * 100000)])
    s = socket.create_connection((ex.host, ex.port))
    hdr = "POST /files/upload HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\n" % ct
    if ex.token:
        hdr += "X-EXECD-ACCESS-TOKEN: %s\r\n" % ex.token
    s.sendall((hdr + "Transfer-Encoding: chunked\r\n\r\n").encode())
    for i in range(0, len(body), 7777):
        part = body[i:i + 7777]
        s.sendall(b"%x\r\n" % len(part) + part + b"\r\n")
    s.sendall(b"0\r\n\r\n")
    resp = s.recv(4096)
    s.close()
    check(resp.startswith(b"HTTP/1.1 200"), "chunked upload: %r" % resp[:100])
    check(open(d(ex, "chunked.bin"), "rb").read() == b"C" * 100000, "chunked content")


def test_upload_pipelined(ex):
    """Two uploads and a ping sent back to back on one connection (HTTP pipelining)."""
    os.makedirs(d(ex), exist_ok=True)
    blob = b""
    for i in range(2):
        body, ct = multipart([({"path": d(ex, "pipe%d" % i)}, b"P%d" % i * 1000)])
        blob += (b"POST /files/upload HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\n"
                 b"Content-Length: %d\r\n" % (ct.encode(), len(body)))
        if ex.token:
            blob += b"X-EXECD-ACCESS-TOKEN: %s\r\n" % ex.token.encode()
        blob += b"\r\n" + body
    blob += b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"
    s = socket.create_connection((ex.host, ex.port), timeout=10)
    s.sendall(blob)
    buf = b""
    while buf.count(b"HTTP/1.1 ") < 3:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    s.close()
    check(buf.count(b"HTTP/1.1 200") == 3, "pipelined answers: %r" % buf[:600])
    for i in range(2):
        check(open(d(ex, "pipe%d" % i), "rb").read() == b"P%d" % i * 1000, "pipelined file %d" % i)


def test_upload_client_abort(ex):
    """A client that goes away mid-upload leaves no file and no temp file behind."""
    os.makedirs(d(ex), exist_ok=True)
    body, ct = multipart([({"path": d(ex, "aborted")}, b"A" * 300000)])
    s = socket.create_connection((ex.host, ex.port))
    hdr = "POST /files/upload HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\n" % ct
    if ex.token:
        hdr += "X-EXECD-ACCESS-TOKEN: %s\r\n" % ex.token
    s.sendall((hdr + "Content-Length: %d\r\n\r\n" % len(body)).encode() + body[:200000])
    wait_until(lambda: [n for n in os.listdir(d(ex)) if n.startswith(".sbx-upload")], 5,
               "the temp file of the upload")
    s.close()
    wait_until(lambda: not [n for n in os.listdir(d(ex)) if n.startswith(".sbx-upload")], 5,
               "the temp file to be removed after the client left")
    check(not os.path.exists(d(ex, "aborted")), "aborted upload left a file")
    check(ex.request("GET", "/ping")[0] == 200, "daemon up")


def test_upload_limit_413(ex):
    # the daemon under test was started with --max-upload 4m
    os.makedirs(d(ex), exist_ok=True)
    st, _, body = upload(ex, [({"path": d(ex, "big")}, b"B" * (5 << 20))])
    check(st == 413, "over the limit: %d %r" % (st, body[:100]))
    check(not os.path.exists(d(ex, "big")), "file of a 413 upload exists")
    check(not [n for n in os.listdir(d(ex)) if n.startswith(".sbx-upload")], "temp file left")
    st, _, _ = upload(ex, [({"path": d(ex, "small")}, b"s" * (1 << 20))])
    check(st == 200, "under the limit after a 413: %d" % st)


def test_upload_full_filesystem_507(ex):
    """A full filesystem is 507 INSUFFICIENT_STORAGE with {code, message}, leaves no partial
    file, and the next upload (that fits) works on the same daemon. Needs root (a 1 MiB tmpfs
    is mounted for it); skipped otherwise."""
    if os.geteuid() != 0:
        print("skip test_upload_full_filesystem_507: needs root for a small tmpfs")
        return
    small = d(ex, "small-fs")
    os.makedirs(small, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "sbx-test", small], check=True)
    try:
        st, _, body = upload(ex, [({"path": small + "/big"}, b"F" * (3 << 20))])
        check(st == 507, "full filesystem: %d %r" % (st, body[:200]))
        err = json.loads(body)
        check(err["code"] == "INSUFFICIENT_STORAGE" and "No space left" in err["message"],
              "507 body %r" % err)
        check(os.listdir(small) == [], "partial or temp file left: %r" % os.listdir(small))
        st, _, body = upload(ex, [({"path": small + "/fits"}, b"f" * 4096)])
        check(st == 200 and open(small + "/fits", "rb").read() == b"f" * 4096,
              "an upload that fits, after the 507: %d %r" % (st, body[:200]))
    finally:
        subprocess.run(["umount", "-l", small], check=False)


def test_download_and_ranges(ex):
    p = d(ex, "dl.bin")
    os.makedirs(d(ex), exist_ok=True)
    data = os.urandom(100000)
    with open(p, "wb") as f:
        f.write(data)
    st, h, body = ex.request("GET", "/files/download?path=" + Q(p))
    check(st == 200 and body == data, "download %d" % st)
    check(h["content-type"] == "application/octet-stream", "ctype %r" % h)
    check(h["content-disposition"] == 'attachment; filename="dl.bin"', "disposition %r" % h)
    for rng, a, b in (("bytes=0-9", 0, 9), ("bytes=99990-", 99990, 99999),
                      ("bytes=-5", 99995, 99999), ("bytes=10-10", 10, 10),
                      ("bytes=50-999999", 50, 99999), ("bytes=1-2,5-6", 1, 2)):
        st, h, body = ex.request("GET", "/files/download?path=" + Q(p), headers={"Range": rng})
        check(st == 206 and body == data[a:b + 1], "range %s: %d len %d" % (rng, st, len(body)))
        check(h["content-range"] == "bytes %d-%d/100000" % (a, b), "content-range %r" % h)
    for rng in ("bytes=100000-", "bytes=5-1", "bytes=x", "items=0-1", "bytes=-0"):
        st, h, body = ex.request("GET", "/files/download?path=" + Q(p), headers={"Range": rng})
        check(st == 416 and json.loads(body)["code"] == "UNKNOWN", "bad range %s: %d" % (rng, st))
    with open(d(ex, "lines.txt"), "w") as f:
        f.write("".join("line%d\n" % i for i in range(1, 11)))
    st, h, body = ex.request("GET", "/files/download?path=%s&offset=3&limit=2" %
                             Q(d(ex, "lines.txt")))
    check(st == 200 and body == b"line3\nline4\n", "line slice %r" % body)
    check(h["content-type"].startswith("text/plain"), "slice type")
    st, _, body = ex.request("GET", "/files/download?path=%s&offset=3" % Q(d(ex, "lines.txt")),
                             headers={"Range": "bytes=0-1"})
    check(st == 400, "offset and Range together: %d" % st)
    st, _, body = ex.request("GET", "/files/download?path=" + Q(d(ex, "nope")))
    check(st == 404 and json.loads(body)["code"] == "FILE_NOT_FOUND", "missing download")
    st, _, body = ex.request("GET", "/files/download?path=" + Q(d(ex)))
    check(st == 400, "download of a directory: %d" % st)
    uni = d(ex, "naïve file.txt")
    with open(uni, "w") as f:
        f.write("x")
    st, h, body = ex.request("GET", "/files/download?path=" + Q(uni))
    check(h["content-disposition"] == "attachment; filename*=UTF-8''na%C3%AFve%20file.txt",
          "RFC 5987 disposition %r" % h["content-disposition"])


def test_permissions_mv_remove(ex):
    os.makedirs(d(ex, "pm"), exist_ok=True)
    p = d(ex, "pm", "f")
    with open(p, "w") as f:
        f.write("x")
    me = pwd.getpwuid(os.getuid()).pw_name
    ex.json("POST", "/files/permissions", {p: {"mode": 751, "owner": me}})
    check(stat.S_IMODE(os.stat(p).st_mode) == 0o751, "chmod 751")
    st, _, _ = ex.request("POST", "/files/permissions", {p: {"mode": 789}})
    check(st == 400, "mode with digit 8/9: %d" % st)
    st, _, _ = ex.request("POST", "/files/permissions", {d(ex, "pm", "missing"): {"mode": 644}})
    check(st == 404, "chmod missing: %d" % st)
    ex.json("POST", "/files/mv", [{"src": p, "dest": d(ex, "pm", "deep", "g")}])
    check(os.path.exists(d(ex, "pm", "deep", "g")) and not os.path.exists(p), "mv")
    with open(p, "w") as f:
        f.write("y")
    st, _, _ = ex.request("POST", "/files/mv", [{"src": p, "dest": d(ex, "pm", "deep", "g")}])
    check(st >= 400 and open(d(ex, "pm", "deep", "g")).read() == "x", "mv onto existing")
    st, _, body = ex.request("POST", "/files/mv", [{"src": d(ex, "pm", "zz"), "dest": p + "2"}])
    check(st == 404, "mv missing: %d" % st)
    st, _, _ = ex.request("POST", "/files/mv", {"src": 1})
    check(st == 400, "mv bad body %d" % st)
    st, _, _ = ex.request("DELETE", "/files?path=%s&path=%s" % (Q(p), Q(d(ex, "pm", "gone"))))
    check(st == 200 and not os.path.exists(p), "remove (missing ignored)")
    st, _, _ = ex.request("DELETE", "/files?path=" + Q(d(ex, "pm", "deep")))
    check(st >= 400 and os.path.isdir(d(ex, "pm", "deep")), "remove of a directory refused")


def test_search_replace(ex):
    base = d(ex, "sr")
    os.makedirs(os.path.join(base, "a", "b"), exist_ok=True)
    for name in ("x.py", "a/y.py", "a/b/z.py", "a/b/readme.md"):
        with open(os.path.join(base, name), "w") as f:
            f.write("foo = 1\nfoo()\n")
    os.symlink(base, os.path.join(base, "a", "loop"))
    res = ex.json("GET", "/files/search?path=%s&pattern=%s" % (Q(base), Q("*.py")))
    names = sorted(os.path.relpath(r["path"], base) for r in res)
    check(names == ["a/b/z.py", "a/y.py", "x.py"], "search *.py %r" % names)
    res = ex.json("GET", "/files/search?path=" + Q(base))
    check(len(res) == 5, "search ** (files and the symlink, loop not followed): %r" % res)
    st, _, _ = ex.request("GET", "/files/search?path=" + Q(d(ex, "nope")))
    check(st == 404, "search missing dir %d" % st)
    f = os.path.join(base, "x.py")
    os.chmod(f, 0o600)
    r = ex.json("POST", "/files/replace?verbose=true", {f: {"old": "foo", "new": "barbaz"}})
    check(r == {f: {"replacedCount": 2}}, "verbose replace %r" % r)
    check(open(f).read() == "barbaz = 1\nbarbaz()\n", "replaced content")
    check(stat.S_IMODE(os.stat(f).st_mode) == 0o600, "replace keeps the mode")
    st, _, body = ex.request("POST", "/files/replace", {f: {"old": "barbaz", "new": ""}})
    check(st == 200 and body == b"" and open(f).read() == " = 1\n()\n", "plain replace")
    st, _, _ = ex.request("POST", "/files/replace", {f: {"old": "", "new": "x"}})
    check(st == 400, "empty old %d" % st)


def test_directories(ex):
    base = d(ex, "dirs")
    ex.json("POST", "/directories", {base + "/p/q": {"mode": 700}, base + "/r": {"mode": 755}})
    check(stat.S_IMODE(os.stat(base + "/p/q").st_mode) == 0o700, "mkdir -p with mode")
    with open(base + "/p/file", "w") as f:
        f.write("x")
    os.symlink("/", base + "/p/zlink")
    lst = ex.json("GET", "/directories/list?path=" + Q(base))
    check([os.path.relpath(e["path"], base) for e in lst] == ["p", "r"], "depth 1 %r" % lst)
    lst = ex.json("GET", "/directories/list?depth=2&path=" + Q(base))
    got = [(os.path.relpath(e["path"], base), e["type"]) for e in lst]
    check(got == [("p", "directory"), ("p/file", "file"), ("p/q", "directory"),
                  ("p/zlink", "symlink"), ("r", "directory")], "depth 2 %r" % got)
    st, _, _ = ex.request("GET", "/directories/list?path=" + Q(base + "/p/zlink"))
    check(st == 400, "symlink root %d" % st)
    st, _, _ = ex.request("DELETE", "/directories?path=" + Q(base + "/p"))
    check(st == 200 and not os.path.exists(base + "/p"), "rm -rf")
    check(os.path.exists("/") and os.path.isdir(base + "/r"), "sibling kept")


if __name__ == "__main__":
    run_tests(local_only=True, tests=[test_upload_and_info, test_upload_errors, test_upload_chunked,
               test_upload_pipelined, test_upload_client_abort, test_upload_limit_413, test_upload_full_filesystem_507,
               test_download_and_ranges, test_permissions_mv_remove,
               test_search_replace, test_directories], args=["--max-upload", "4m"])
