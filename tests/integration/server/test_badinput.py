#!/usr/bin/env python3
"""Malformed requests, each answered 4xx with a {code,message} body and an X-Request-ID, and
the server still up afterwards (and exiting cleanly: no leak, no crash)."""
import socket

from harness import Fail, check, main

GOOD = {"image": {"uri": "host"}, "entrypoint": ["sleep", "60"], "timeout": 120}
UUID0 = "00000000-0000-4000-8000-000000000000"


def body(**over):
    b = dict(GOOD)
    for k, v in over.items():
        if v is None:
            b.pop(k, None)
        else:
            b[k] = v
    return b


def cases(sid):
    c = [
        ("bad JSON", "POST", "/v1/sandboxes", b"{not json", {}, 400),
        ("JSON array body", "POST", "/v1/sandboxes", b"[1,2]", {}, 400),
        ("empty body", "POST", "/v1/sandboxes", b"", {}, 400),
        ("image missing", "POST", "/v1/sandboxes", body(image=None), {}, 400),
        ("image wrong type", "POST", "/v1/sandboxes", body(image="python"), {}, 400),
        ("entrypoint empty", "POST", "/v1/sandboxes", body(entrypoint=[]), {}, 400),
        ("entrypoint not strings", "POST", "/v1/sandboxes", body(entrypoint=[1]), {}, 400),
        ("timeout too small", "POST", "/v1/sandboxes", body(timeout=59), {}, 400),
        ("timeout string", "POST", "/v1/sandboxes", body(timeout="600"), {}, 400),
        ("timeout over the max", "POST", "/v1/sandboxes", body(timeout=10 ** 9), {}, 400),
        ("env not strings", "POST", "/v1/sandboxes", body(env={"A": 1}), {}, 400),
        ("metadata bad key", "POST", "/v1/sandboxes", body(metadata={"-a": "b"}), {}, 400),
        ("metadata reserved", "POST", "/v1/sandboxes",
         body(metadata={"opensandbox.io/x": "b"}), {}, 400),
        ("metadata long value", "POST", "/v1/sandboxes", body(metadata={"a": "b" * 64}), {}, 400),
        ("resourceLimits wrong", "POST", "/v1/sandboxes", body(resourceLimits=[]), {}, 400),
        ("unknown provider", "POST", "/v1/sandboxes", body(provider="docker"), {}, 400),
        ("unknown provider ext", "POST", "/v1/sandboxes",
         body(extensions={"provider": "nope"}), {}, 400),
        ("provider wrong type", "POST", "/v1/sandboxes", body(provider=5), {}, 400),
        ("volume bad", "POST", "/v1/sandboxes", body(volumes=[{"name": "X"}]), {}, 400),
        ("volume on process", "POST", "/v1/sandboxes",
         body(volumes=[{"name": "v", "mountPath": "/d", "host": {"path": "/tmp"}}]), {}, 400),
        ("snapshot restore", "POST", "/v1/sandboxes", body(image=None, snapshotId="x"), {}, 400),
        ("oversized body", "POST", "/v1/sandboxes", b"{" + b" " * (2 << 20) + b"}", {}, 413),
        ("bad id", "GET", "/v1/sandboxes/not-a-uuid", None, {}, 404),
        ("long id", "GET", "/v1/sandboxes/" + "a" * 500, None, {}, 404),
        ("unknown id", "GET", "/v1/sandboxes/" + UUID0, None, {}, 404),
        ("delete unknown", "DELETE", "/v1/sandboxes/" + UUID0, None, {}, 404),
        ("pause unknown", "POST", "/v1/sandboxes/%s/pause" % UUID0, None, {}, 404),
        ("bad port 0", "GET", "/v1/sandboxes/%s/endpoints/0" % sid, None, {}, 400),
        ("bad port big", "GET", "/v1/sandboxes/%s/endpoints/65536" % sid, None, {}, 400),
        ("bad port text", "GET", "/v1/sandboxes/%s/endpoints/http" % sid, None, {}, 400),
        ("signed endpoint", "GET", "/v1/sandboxes/%s/endpoints/80?expires=99" % sid, None, {},
         400),
        ("proxy bad port", "GET", "/sandboxes/%s/proxy/99999/ping" % sid, None, {}, 400),
        ("proxy dotdot", "GET", "/sandboxes/%s/proxy/44772/../../etc/passwd" % sid, None, {},
         400),
        ("proxy encoded dotdot", "GET", "/sandboxes/%s/proxy/44772/a/%%2e%%2e/x" % sid, None,
         {}, 400),
        ("proxy encoded slash", "GET", "/sandboxes/%s/proxy/44772/a%%2F..%%2Fb" % sid, None,
         {}, 400),
        ("proxy unknown sandbox", "GET", "/sandboxes/%s/proxy/44772/ping" % UUID0, None, {},
         404),
        ("proxy closed port", "GET", "/sandboxes/%s/proxy/1/x" % sid, None, {}, 502),
        ("renew bad body", "POST", "/v1/sandboxes/%s/renew-expiration" % sid, {"expiresAt": 5},
         {}, 400),
        ("renew bad time", "POST", "/v1/sandboxes/%s/renew-expiration" % sid,
         {"expiresAt": "tomorrow"}, {}, 400),
        ("patch not object", "PATCH", "/v1/sandboxes/%s/metadata" % sid, [1], {}, 400),
        ("patch bad value", "PATCH", "/v1/sandboxes/%s/metadata" % sid, {"a": 1}, {}, 400),
        ("list bad page", "GET", "/v1/sandboxes?page=0", None, {}, 400),
        ("list bad pageSize", "GET", "/v1/sandboxes?pageSize=201", None, {}, 400),
        ("list bad metadata", "GET", "/v1/sandboxes?metadata=a%25zz", None, {}, 400),
        ("unknown route", "GET", "/v1/nothing", None, {}, 404),
        ("bad method", "PUT", "/v1/sandboxes", None, {}, 405),
        ("pools unknown", "GET", "/v1/pools/nope", None, {}, 404),
        ("pool bad name", "POST", "/v1/pools", {"name": "x" * 10000, "template": {},
                                                "capacitySpec": {}}, {}, 400),
        ("pool bad capacity", "POST", "/v1/pools",
         {"name": "p", "template": {"image": {"uri": "host"}, "entrypoint": ["sleep", "1"]},
          "capacitySpec": {"bufferMax": -1, "bufferMin": 0, "poolMax": 1, "poolMin": 0}}, {},
         400),
        ("pool PUT not object", "PUT", "/v1/pools/p", [1], {}, 400),
        ("poolRef unknown", "POST", "/v1/sandboxes", {"extensions": {"poolRef": "nope"}}, {},
         404),
        ("poolRef not string", "POST", "/v1/sandboxes", {"extensions": {"poolRef": 1}}, {}, 400),
        ("snapshot on process", "POST", "/v1/sandboxes/%s/snapshots" % sid, None, {}, 501),
        ("snapshot name type", "POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": 1}, {}, 400),
        ("snapshot list bad state page", "GET", "/v1/snapshots?page=x", None, {}, 400),
        ("snapshot import empty", "POST", "/v1/snapshots/import", None, {}, 400),
        ("missing key", "GET", "/v1/sandboxes", None, {"key": False}, 401),
        ("wrong key", "GET", "/v1/sandboxes", None, {"key": "wrong"}, 401),
        ("wrong bearer", "GET", "/v1/sandboxes", None,
         {"key": False, "headers": {"Authorization": "Bearer nope"}}, 401),
        ("proxy without key", "GET", "/sandboxes/%s/proxy/44772/ping" % sid, None,
         {"key": False}, 401),
    ]
    return c


def send(s, method, path, payload, opts):
    kw = {"key": opts.get("key", True), "headers": opts.get("headers")}
    if isinstance(payload, (bytes, bytearray)):
        kw["raw"] = payload
        kw["headers"] = dict(kw["headers"] or {}, **{"Content-Type": "application/json"})
    elif payload is not None:
        kw["body"] = payload
    try:
        return s.request(method, path, **kw)
    except (ConnectionResetError, BrokenPipeError):
        return None


def check_case(s, name, method, path, payload, opts, want):
    r = send(s, method, path, payload, opts)
    if r is None and want == 413:
        return  # the server may answer 413 and close before reading the whole body
    check(r is not None, "%s: no response" % name)
    check(r.status == want, "%s: want %d, got %r" % (name, want, r))
    check(r.header("X-Request-ID"), "%s: X-Request-ID" % name)
    j = r.json()
    check(isinstance(j.get("code"), str) and isinstance(j.get("message"), str) and j["code"],
          "%s: {code,message}: %r" % (name, j))
    check(s.request("GET", "/health", key=False).status == 200, "%s: server still up" % name)


def raw_garbage(s):
    """Requests that are not HTTP at all: the server must survive them."""
    for data in (b"\x00\x01\x02garbage\r\n\r\n", b"GET / HTTP/1.1\r\nHost: x\r\n" +
                 b"X-Big: " + b"a" * 100000 + b"\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:
            try:
                c.sendall(data)
                c.recv(4096)
            except OSError:
                pass
    check(s.request("GET", "/health", key=False).status == 200, "alive after garbage")


def raw_answer(s, data):
    """Send raw bytes; return everything the server sends before it closes (3 s at most)."""
    with socket.create_connection(("127.0.0.1", s.port), timeout=3) as c:
        c.sendall(data)
        out = b""
        try:
            while True:
                got = c.recv(65536)
                if not got:
                    break
                out += got
        except OSError:
            pass
    return out


def ambiguous_framing(s):
    """RFC 9112 6.3: a body whose end two parsers could place differently is refused with
    400 {code, message}, and the connection closes, so nothing after it can be read as a
    request of its own (request smuggling towards the router's sandboxes)."""
    key = s.key.encode()
    smuggled = b"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nOPEN-SANDBOX-API-KEY: " + key + \
        b"\r\n\r\n"
    heads = {
        "CL+TE": b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "CL twice": b"Content-Length: 2\r\nContent-Length: 30\r\n\r\n{}",
        "TE not chunked": b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        "TE twice": b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    }
    for name, rest in heads.items():
        out = raw_answer(s, b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nOPEN-SANDBOX-API-KEY: " +
                         key + b"\r\n" + rest + smuggled)
        check(out.startswith(b"HTTP/1.1 400"), "%s: 400, got %r" % (name, out[:60]))
        check(b"GENERAL::BAD_REQUEST" in out, "%s: {code, message}: %r" % (name, out[-200:]))
        check(out.count(b"HTTP/1.1 ") == 1, "%s: nothing after it is answered: %r" % (name, out))
    # control: the same requests framed one way each are served
    out = raw_answer(s, b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                        b"Connection: close\r\n\r\n")
    check(out.startswith(b"HTTP/1.1 200"), "one Content-Length is fine: %r" % out[:60])


def test(new_server):
    s = new_server()
    s.start()
    r = s.create()
    check(r.status == 202, "create: %r" % r)
    sid = r.json()["id"]
    for case in cases(sid):
        check_case(s, *case)
    unknown = send(s, "POST", "/v1/sandboxes", body(provider="docker"), {}).json()
    check("process" in unknown["message"], "unknown provider names the supported ones")
    raw_garbage(s)
    ambiguous_framing(s)
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    rc = s.stop()
    if rc != 0:
        raise Fail("server exit status %d: %s" % (rc, s.log()))


if __name__ == "__main__":
    main(test)
