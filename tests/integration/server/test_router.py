#!/usr/bin/env python3
"""The router: an app started inside a sandbox (through execd) reached through
/sandboxes/{id}/proxy/{port}/...: SSE arrives event by event (not buffered), request bodies
(sized and chunked) and raw query strings pass through, server credentials are stripped,
X-Forwarded-* added, large and EOF-terminated bodies, errors while a body is still being sent
answered (not a broken pipe), WebSocket upgrade with echo."""
import base64
import http.client
import json
import os
import socket
import time

from harness import check, free_port, main, wait_for

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "app_in_sandbox.py")


def start_app(s, sid, port):
    src = open(APP).read()
    # write the app with a command (no multipart needed), then start it in the background
    out, ev = s.run(sid, "cat > app.py <<'SBX_EOF'\n%sSBX_EOF\necho written" % src)
    check(out == ["written"], "app written: %r" % ev)
    r = s.request("POST", "/sandboxes/%s/proxy/44772/command" % sid,
                  {"command": "python3 app.py %d" % port, "background": True})
    check(r.status == 200, "start app: %r" % r)
    wait_for(lambda: s.request("GET", "/sandboxes/%s/proxy/%d/x" % (sid, port)).status == 200,
             "the app to listen")


def check_sse(s, sid, port):
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    c.request("GET", "/sandboxes/%s/proxy/%d/sse" % (sid, port),
              headers={"OPEN-SANDBOX-API-KEY": s.key})
    r = c.getresponse()
    check(r.status == 200 and r.getheader("Content-Type") == "text/event-stream",
          "sse head: %d %r" % (r.status, r.getheaders()))
    times, buf = [], b""
    while True:
        chunk = r.read1(4096)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            times.append((json.loads(ev)["n"], time.time()))
    c.close()
    check([n for n, _ in times] == [0, 1, 2], "all events: %r" % times)
    check(times[2][1] - times[0][1] > 1.0, "events arrive as sent, not buffered: %r" % times)


def check_echo(s, sid, port):
    path = "/sandboxes/%s/proxy/%d/echo/a%%20b?x=1&y=%%2Fz&flag" % (sid, port)
    r = s.request("POST", path, raw=b"hello body", headers={
        "Cookie": "c=1", "Authorization": "Bearer zzz", "X-EXECD-ACCESS-TOKEN": "forged",
        "X-Custom": "kept"})
    check(r.status == 200, "echo: %r" % r)
    j = r.json()
    h = {k.lower(): v for k, v in j["headers"].items()}
    check(j["path"] == "/echo/a%20b?x=1&y=%2Fz&flag", "path and query raw: %r" % j["path"])
    check(j["body"] == "hello body", "body")
    for gone in ("cookie", "authorization", "open-sandbox-api-key", "x-execd-access-token"):
        check(gone not in h, "%s stripped: %r" % (gone, h))
    check(h.get("x-custom") == "kept" and h.get("x-forwarded-for") == "127.0.0.1", "headers")
    # chunked request body
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    c.request("POST", "/sandboxes/%s/proxy/%d/echo" % (sid, port),
              body=iter([b"part1-", b"part2"]), encode_chunked=True,
              headers={"OPEN-SANDBOX-API-KEY": s.key, "Transfer-Encoding": "chunked"})
    j = json.loads(c.getresponse().read())
    c.close()
    check(j["body"] == "part1-part2", "chunked body: %r" % j["body"])


def check_bodies(s, sid, port):
    r = s.request("GET", "/sandboxes/%s/proxy/%d/big" % (sid, port))
    check(r.body == bytes(range(256)) * (5 * 4096), "5 MiB body intact")
    r = s.request("GET", "/sandboxes/%s/proxy/%d/eof" % (sid, port))
    check(r.status == 200 and r.body == b"until-eof", "body ended by EOF: %r" % r)


def ws_frame(text):
    data = text.encode()
    mask = b"\x01\x02\x03\x04"
    return bytes([0x81, 0x80 | len(data)]) + mask + bytes(
        b ^ mask[i % 4] for i, b in enumerate(data))


def check_expect(s, sid, port):
    """Expect: 100-continue is answered once (by the server), not forwarded."""
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    c.putrequest("POST", "/sandboxes/%s/proxy/%d/echo" % (sid, port))
    c.putheader("OPEN-SANDBOX-API-KEY", s.key)
    c.putheader("Expect", "100-continue")
    c.putheader("Content-Length", "4")
    c.endheaders()
    c.send(b"data")
    r = c.getresponse()
    j = json.loads(r.read())
    c.close()
    check(r.status == 200 and j["body"] == "data", "expect 100-continue: %r" % j)
    check("expect" not in {k.lower() for k in j["headers"]}, "Expect not forwarded")


def post_streamed(s, path, size, expect=False):
    """POST size bytes as a client that reads the answer only after sending everything
    (Python's http.client, like most SDKs): returns (status, body) or raises OSError."""
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
    block = b"z" * (1 << 20)

    def body():
        for _ in range(size >> 20):
            yield block
    headers = {"OPEN-SANDBOX-API-KEY": s.key, "Content-Length": str(size)}
    if expect:
        headers["Expect"] = "100-continue"
    try:
        c.request("POST", path, body=body(), headers=headers)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def check_early_errors(s, sid, port):
    """Errors while the client is still sending a body reach it as answers, never as a broken
    pipe: an upstream that refuses before reading the body and closes (its answer is
    forwarded), a port nobody listens on, a sandbox that does not exist. Later requests work."""
    st, body = post_streamed(s, "/sandboxes/%s/proxy/%d/early" % (sid, port), 32 << 20)
    check(st == 413 and json.loads(body)["code"] == "TOO_BIG",
          "the upstream's early answer is forwarded: %d %r" % (st, body[:200]))
    st, body = post_streamed(s, "/sandboxes/%s/proxy/%d/x" % (sid, free_port()), 8 << 20)
    check(st == 502 and json.loads(body)["code"] == "SANDBOX::PROXY_CONNECT_FAILED",
          "nothing listening: %d %r" % (st, body[:200]))
    st, body = post_streamed(s, "/sandboxes/00000000-0000-4000-8000-000000000000/proxy/%d/x"
                             % port, 8 << 20)
    check(st == 404 and "code" in json.loads(body), "no such sandbox: %d %r" % (st, body[:200]))
    st, body = post_streamed(s, "/sandboxes/%s/proxy/%d/echo" % (sid, port), 4 << 20)
    check(st == 200 and len(json.loads(body)["body"]) == 4 << 20,
          "a body through the router after the errors: %d" % st)


def open_websocket(s, sid, port):
    key = base64.b64encode(os.urandom(16)).decode()
    req = ("GET /sandboxes/%s/proxy/%d/ws HTTP/1.1\r\nHost: 127.0.0.1\r\n"
           "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
           "Sec-WebSocket-Version: 13\r\nOPEN-SANDBOX-API-KEY: %s\r\n\r\n" %
           (sid, port, key, s.key))
    c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    c.sendall(req.encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += c.recv(1)
    check(head.startswith(b"HTTP/1.1 101"), "101: %r" % head)
    return c


def check_websocket(s, sid, port):
    key = base64.b64encode(os.urandom(16)).decode()
    req = ("GET /sandboxes/%s/proxy/%d/ws HTTP/1.1\r\nHost: 127.0.0.1\r\n"
           "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
           "Sec-WebSocket-Version: 13\r\nOPEN-SANDBOX-API-KEY: %s\r\n\r\n" %
           (sid, port, key, s.key))
    with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:
        c.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += c.recv(1)
        check(head.startswith(b"HTTP/1.1 101"), "101: %r" % head)
        check(b"sec-websocket-accept" in head.lower(), "accept header passed: %r" % head)
        for msg in ("hello", "again"):
            c.sendall(ws_frame(msg))
            hdr = c.recv(2)
            data = b""
            while len(data) < hdr[1]:
                data += c.recv(hdr[1] - len(data))
            check(data == b"echo:" + msg.encode(), "ws echo: %r" % data)


def check_hostile_heads(s, sid, port):
    """The upstream is the sandbox: heads two parsers could read differently are refused
    (502 {code, message}), a 101 nobody asked for too; what would act on the API's origin is
    dropped, and every proxied answer runs sandboxed (CSP) and unsniffed."""
    base = "/sandboxes/%s/proxy/%d/raw/" % (sid, port)
    for name in ("bare-cr", "fold", "cl-te", "dup-cl", "bad-name", "nul", "gzip-te",
                 "bad-status", "101"):
        r = s.request("GET", base + name)
        check(r.status == 502 and r.json()["code"] == "SANDBOX::PROXY_ERROR",
              "%s is refused: %r" % (name, r))
        check(r.header("X-Injected") is None, "%s: no injected header" % name)
    r = s.request("GET", base + "cookie")
    check(r.status == 200 and r.body == b"hello", "a plain answer passes: %r" % r)
    check(r.header("Set-Cookie") is None, "Set-Cookie is dropped")
    check(r.header("Clear-Site-Data") is None, "Clear-Site-Data is dropped")
    check(r.header("Access-Control-Allow-Credentials") is None, "CORS from the sandbox dropped")
    check(r.header("X-Kept") == "yes", "other headers pass")
    check(r.header("Content-Security-Policy") == "sandbox", "CSP sandbox on proxied answers")
    check(r.header("X-Content-Type-Options") == "nosniff", "nosniff on proxied answers")
    # a bad chunk size after the head: the body is cut off, never guessed at
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    c.request("GET", base + "bad-chunk", headers={"OPEN-SANDBOX-API-KEY": s.key})
    resp = c.getresponse()
    try:
        body = resp.read()
        check(False, "a bad chunk size reached the client as a body: %r" % body)
    except http.client.IncompleteRead:
        pass
    c.close()


def test(new_server):
    s = new_server()
    s.start()
    sid = s.create().json()["id"]
    port = free_port()
    start_app(s, sid, port)
    check_sse(s, sid, port)
    check_echo(s, sid, port)
    check_bodies(s, sid, port)
    check_expect(s, sid, port)
    check_early_errors(s, sid, port)
    check_websocket(s, sid, port)
    check_hostile_heads(s, sid, port)
    ws = open_websocket(s, sid, port)  # still open when the server stops
    check(s.stop() == 0, "clean stop with an open WebSocket")
    ws.close()
    s.start()  # the sandbox outlived the server; the new one re-adopts it
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    check(s.stop() == 0, "clean stop")


if __name__ == "__main__":
    main(test)
