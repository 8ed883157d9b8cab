#!/usr/bin/env python3
"""Credential injection of credentialProxy (issue 15: plain HTTP and HTTPS), with real traffic
on this machine only: the test makes its own "internet" (a network namespace behind a veth,
TEST-NET-3 addresses 203.0.113.0/24), an upstream DNS server there answering for the test's
names (the server's resolver forwards to it: providers.native.egress_dns) and an HTTP server
on port 80 (and HTTPS on 443, a certificate of the test's own CA, which the server is told to
trust: providers.native.credproxy_upstream_ca) of each address that logs every request head it
gets (to a file the test reads) and answers without echoing any of it. From inside real
sandboxes:

- a matching request (host, port, method, path) gets the binding's header, the sandbox's own
  copy of it removed, `Connection: close`; the sandbox's answer is the upstream's;
- bearer, apiKey and customHeaders bindings; basic; several headers at once;
- unmatched requests (another path, method or host) pass byte for byte untouched;
- the Host-spoofing attack: a sandbox allowed to reach evil.test connects there with
  `Host: api.test`: evil.test never sees the credential; the same with an address of
  api.test's the sandbox's resolver never answered for it (a hard-coded one in allow mode);
- a path with dot segments (plain, encoded, with `;` parameters, after a `#`) or a Host whose
  port only wraps to the connection's is never given a credential;
- HTTPS: a bound name is terminated with a leaf of the sandbox's own CA (its bundle and env
  name it), injected and sent on over verified TLS; an unbound name is spliced end to end (the
  upstream's own certificate reaches the sandbox); another path is not injected; a Host other
  than the SNI name is not; the spoof (evil.test's address, SNI api.test) is spliced; an
  upstream whose certificate does not verify gets nothing;
- a vault change applies live (a new value, a deleted binding);
- an allow-default sandbox is injected too; a sandbox without a vault is never redirected;
- the value is never in the sandbox (env, files, the answers it reads);
- a deleted sandbox leaves nothing in credproxy4; the server stops cleanly."""
import base64
import ctypes
import json
import os
import subprocess
import tempfile
import time

from harness import Skip, check, main, remove_bridge

UP = "203.0.113.2"
ADDRS = {"api.test": "203.0.113.20", "evil.test": "203.0.113.21", "other.test": "203.0.113.22",
         "key.test": "203.0.113.23", "multi.test": "203.0.113.24", "bad.test": "203.0.113.25",
         "alias.test": "203.0.113.20",  # api.test's address (a shared one, as on a CDN)
         "ka.test": "203.0.113.26", "free.test": "203.0.113.27"}  # keep-alive upstreams
KA = [ADDRS["ka.test"], ADDRS["free.test"]]
SECRET = "sk-inj-" + "%08x" % (os.getpid() * 2654435761 % 2**32) + "-Qx9"
SECRET2 = "sk-new-" + SECRET[::-1]
B64 = base64.b64encode(b"user:" + SECRET.encode()).decode()

DNS_SERVER = r'''
import socket, struct, threading
ADDRS = %r
def answer(q):
    if len(q) < 12: return None
    off, labels = 12, []
    while q[off]:
        l = q[off]; labels.append(q[off+1:off+1+l].decode().lower()); off += 1 + l
    name = ".".join(labels); qtype = struct.unpack(">H", q[off+1:off+3])[0]; end = off + 5
    ip = ADDRS.get(name)
    an = 1 if ip and qtype == 1 else 0
    r = q[:2] + struct.pack(">HHHHH", 0x8180 if ip else 0x8183, 1, an, 0, 0) + q[12:end]
    if an:
        r += b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton(ip)
    return r
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("%s", 53))
print("ready", flush=True)
while True:
    q, a = s.recvfrom(4096); r = answer(q)
    if r: s.sendto(r, a)
''' % (ADDRS, UP)

# Port 80 of every address: each request head (up to its blank line) appended to LOG as one JSON
# line {"to": address, "head": text, "conn": the connection's serial number}; the answer names
# the address and nothing of the request. One request a connection, answered with
# `Connection: close`; but on the KA addresses connections are kept alive (requests framed by
# Content-Length) unless a request says close, which is echoed as real servers do; and even
# then a request already sent behind it (pipelined) is still served: the sloppiest upstream,
# one that ignores RFC 9112 9.6, so that whatever a pipelined request carries is seen.
HTTP_SERVER = r'''
import itertools, json, socket, threading, sys
LOG = sys.argv[1]
KA = %r
lock = threading.Lock()
serial = itertools.count(1)
def recv_more(c, data, timeout):
    c.settimeout(timeout); d = c.recv(65536)
    if not d: raise EOFError
    return data + d
def log(to, head, n):
    with lock, open(LOG, "a") as f:
        f.write(json.dumps({"to": to, "head": head, "conn": n}) + "\n")
def answer(c, to, close):
    body = b"ok-from-" + to.encode()
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %%d\r\nConnection: %%s\r\n\r\n"
              %% (len(body), b"close" if close else b"keep-alive") + body)
def one(c, to):
    n = next(serial); data = b""
    try:
        while b"\r\n\r\n" not in data:
            data = recv_more(c, data, 5)
    except Exception: pass
    if to.split("/")[0] in KA:
        return keep_alive(c, to, n, data)
    try:
        log(to, data.split(b"\r\n\r\n")[0].decode("latin-1"), n)
        answer(c, to, True)
    except Exception: pass
    c.close()
def upgraded(c):
    # (a WebSocket server's 101, then what it reads echoed as "echo:<bytes>" until the end)
    try:
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                  b"Connection: Upgrade\r\n\r\n")
        c.settimeout(5)
        while True:
            d = c.recv(65536)
            if not d: break
            c.sendall(b"echo:" + d)
    except Exception: pass
    c.close()
def keep_alive(c, to, n, data):
    try:
        while True:
            while b"\r\n\r\n" not in data:
                data = recv_more(c, data, 5)
            head, data = data.split(b"\r\n\r\n", 1)
            text = head.decode("latin-1"); cl = 0
            for line in text.split("\r\n")[1:]:
                k, _, v = line.partition(":")
                if k.strip().lower() == "content-length": cl = int(v)
            while len(data) < cl:
                data = recv_more(c, data, 5)
            data = data[cl:]
            log(to, text, n)
            low = text.lower()
            if "\r\nupgrade: websocket" in low and "\r\nconnection: upgrade, close" in low:
                return upgraded(c)
            close = "\r\nconnection: close" in low
            answer(c, to, close)
            if close and not data:
                data = recv_more(c, data, 0.5)  # (sloppy: a request right behind is served)
    except Exception: pass
    c.close()
def tls_one(c, to, ctx):
    try:
        c.settimeout(5); one(ctx.wrap_socket(c, server_side=True), to + "/tls")
    except Exception: c.close()
def https(d):
    import ssl
    good = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); good.load_cert_chain(d + "/srv.pem", d + "/srv.key")
    bad = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); bad.load_cert_chain(d + "/bad.pem", d + "/bad.key")
    t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind(("0.0.0.0", 443)); t.listen(64)
    while True:
        c, _ = t.accept(); to = c.getsockname()[0]
        # bad.test's address presents a certificate no CA of the test signed
        threading.Thread(target=tls_one, args=(c, to, bad if to.endswith(".25") else good),
                         daemon=True).start()
threading.Thread(target=https, args=(sys.argv[2],), daemon=True).start()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 80)); s.listen(64)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=one, args=(c, c.getsockname()[0]), daemon=True).start()
''' % KA

# In a sandbox: `send CONNECT_TO HOST_HEADER METHOD PATH [Name:value ...]`: one request over
# HTTP/1.1 (keep-alive asked for), the whole answer printed (its head and body), or "FAIL why".
# CONNECT_TO: a name (resolved through libc, i.e. sbx's resolver) or an address.
SEND = r'''
import socket, sys
to, host, method, path = sys.argv[1:5]
extra = "".join(h.replace(":", ": ", 1) + "\r\n" for h in sys.argv[5:])
try:
    s = socket.create_connection((to, 80), timeout=5)
    s.sendall(("%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sbx-test\r\n%sConnection: keep-alive\r\n\r\n"
               % (method, path, host, extra)).encode())
    data = b""
    while True:
        d = s.recv(65536)
        if not d: break
        data += d
    print(data.decode("latin-1").replace("\r\n", "|"))
except Exception as e:
    print("FAIL %s" % type(e).__name__)
'''
SEND_B64 = base64.b64encode(SEND.encode()).decode()

# `tls CONNECT_TO SNI HOST_HEADER PATH CAFILE|- [Name:value ...]`: one GET over HTTPS verified for
# SNI (with CAFILE, else the default CAs, i.e. the sandbox's bundle), then "ISSUER=<CN> " and the
# whole answer; or "FAIL why".
TLS = r'''
import socket, ssl, sys
to, sni, host, path, cafile = sys.argv[1:6]
extra = "".join(h.replace(":", ": ", 1) + "\r\n" for h in sys.argv[6:])
try:
    ctx = ssl.create_default_context(cafile=None if cafile == "-" else cafile)
    s = ctx.wrap_socket(socket.create_connection((to, 443), timeout=5), server_hostname=sni)
    issuer = dict(x[0] for x in s.getpeercert()["issuer"]).get("commonName", "?")
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sbx-test\r\n%sConnection: keep-alive\r\n\r\n"
               % (path, host, extra)).encode())
    data = b""
    while True:
        d = s.recv(65536)
        if not d: break
        data += d
    print("ISSUER=" + issuer.replace(" ", "_"), data.decode("latin-1").replace("\r\n", "|"))
except Exception as e:
    print("FAIL %s %s" % (type(e).__name__, str(e)[:80]))
'''
TLS_B64 = base64.b64encode(TLS.encode()).decode()


def make_pki(d):
    """The test's CA, a server certificate of it for every test name, and a self-signed one."""
    def run(*argv):
        r = subprocess.run(["openssl"] + list(argv), capture_output=True, text=True, cwd=d)
        check(r.returncode == 0, "openssl %r: %s" % (argv[:2], r.stderr[-300:]))
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=sbx test upstream CA")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=test upstream")
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=" + ",".join("DNS:" + n for n in ADDRS) + "\n")
    run("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "srv.pem", "-days", "2", "-extfile", "san.ext")
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "bad.key", "-out", "bad.pem", "-days", "2", "-subj", "/CN=bad.test",
        "-addext", "subjectAltName=DNS:bad.test")


# `ka NAME tls|plain`: http.client on one keep-alive connection: GET /public, then POST
# /v1/chat with a body; prints each answer's status and body.
# `pipe NAME REQ1 REQ2`: the two requests (`METHOD PATH`) written at once on one connection
# (pipelined), whatever comes back printed.
KEEPALIVE = r'''
import http.client, socket, ssl, sys
mode, name = sys.argv[1:3]
try:
    if mode == "ka":
        if sys.argv[3] == "tls":
            c = http.client.HTTPSConnection(name, 443, timeout=5, context=ssl.create_default_context())
        else:
            c = http.client.HTTPConnection(name, 80, timeout=5)
        out = []
        for method, path, body in (("GET", "/public", None), ("POST", "/v1/chat", b'{"q":1}')):
            c.request(method, path, body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            out.append("%d %s" % (r.status, r.read().decode()))
        print(" | ".join(out))
    elif mode == "ws":
        s = socket.create_connection((name, 80), timeout=5)
        s.sendall(("GET /v1/ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: "
                   "keep-alive, Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n" % name).encode())
        got = b""
        while b"\r\n\r\n" not in got:
            d = s.recv(65536)
            if not d: break
            got += d
        out = [got.split(b"\r\n")[0].decode()]
        for msg in (b"ping", b"pong"):  # the upgraded connection stays open both ways
            s.sendall(msg)
            out.append(s.recv(65536).decode())
        print(" | ".join(out))
    else:
        reqs = [r.split(" ") for r in sys.argv[3:5]]
        data = b"".join(("%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 2\r\n\r\n{}"
                         % (m, p, name)).encode() for m, p in reqs)
        s = socket.create_connection((name, 80), timeout=5)
        s.sendall(data)
        got, mark = b"", b"ok-from-" + s.getpeername()[0].encode()
        while got.count(mark) < 2:  # (a sloppy upstream answers both, then keeps it open)
            d = s.recv(65536)
            if not d: break
            got += d
        print(got.decode("latin-1").replace("\r\n", "|"))
except Exception as e:
    print("FAIL %s %s" % (type(e).__name__, str(e)[:80]))
'''
KEEPALIVE_B64 = base64.b64encode(KEEPALIVE.encode()).decode()


def keepalive_run(s, sid, *args):
    out, _ = s.run(sid, "python3 -c \"$(echo %s | base64 -d)\" %s" % (
        KEEPALIVE_B64, " ".join("'%s'" % x for x in args)), timeout=60)
    return " ".join(out).strip()


def auth_of(h):
    return [v for n, v in headers(h["head"]) if n == "authorization"]


def keepalive(s, a, up):
    """Issue 15: a keep-alive client (http.client, one connection) sends an unmatched request,
    then a matched one, to a bound host: the first goes with `Connection: close` and no
    credential, the second comes on a new connection and gets it (plain HTTP and HTTPS). Two
    requests written at once (pipelined) to a server that serves the second despite the close:
    the second, never checked, never carries a credential. An unbound host's keep-alive
    connection is untouched: both requests on one upstream connection, byte for byte. A
    WebSocket upgrade to a bound host keeps working (`Connection: upgrade, close`)."""
    for mode, to in (("plain", ADDRS["ka.test"]), ("tls", ADDRS["ka.test"] + "/tls")):
        out = keepalive_run(s, a, "ka", "ka.test", mode)
        check(out == "200 ok-from-%s | 200 ok-from-%s" % (to, to),
              "%s: both answers on the keep-alive client: %r" % (mode, out))
        got = up.new()
        check(len(got) == 2 and [g["to"] for g in got] == [to, to],
              "%s: two requests upstream: %r" % (mode, got))
        first, second = got
        check(first["head"].startswith("GET /public HTTP/1.1\r\n") and auth_of(first) == [] and
              ("connection", "close") in headers(first["head"]),
              "%s: the unmatched one: no credential, `Connection: close`: %r" % (mode, first))
        check(second["head"].startswith("POST /v1/chat HTTP/1.1\r\n") and
              auth_of(second) == ["Bearer " + SECRET],
              "%s: the matched one after it gets the credential: %r" % (mode, second))
        check(first["conn"] != second["conn"], "%s: on a new connection: %r" % (mode, got))
    # pipelined: unmatched then matched, matched then matched (only the first is ever checked)
    for pair in (("GET /public", "POST /v1/chat"), ("POST /v1/chat", "POST /v1/other")):
        out = keepalive_run(s, a, "pipe", "ka.test", *pair)
        check(out.count("ok-from-") == 2, "pipelined %r: both answered: %r" % (pair, out))
        no_secret("the pipelined answers", out)
        got = up.new()
        check(len(got) == 2 and got[0]["conn"] == got[1]["conn"],
              "pipelined %r: the sloppy upstream served both on one connection: %r" % (pair, got))
        want = ["Bearer " + SECRET] if pair[0].startswith("POST") else []
        check(auth_of(got[0]) == want and ("connection", "close") in headers(got[0]["head"]),
              "pipelined %r: the first decided on, closed: %r" % (pair, got[0]))
        check(got[1]["head"] == "%s HTTP/1.1\r\nHost: ka.test\r\nContent-Length: 2" % pair[1],
              "pipelined %r: the second, not checked, as it came, no credential: %r"
              % (pair, got[1]))
    # a WebSocket upgrade to a bound host: `Connection: upgrade, close` and the credential;
    # the server switches (101 is no final response), the connection goes on both ways
    out = keepalive_run(s, a, "ws", "ka.test")
    check(out == "HTTP/1.1 101 Switching Protocols | echo:ping | echo:pong",
          "a WebSocket upgrade through the proxy works: %r" % out)
    h = one_head(up, "a WebSocket upgrade")
    check(auth_of(h) == ["Bearer " + SECRET] and h["head"].endswith(
        "\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s"
        "\r\nConnection: upgrade, close" % SECRET), "the upgrade's head: %r" % h)
    # an unbound host: one upstream connection, nothing changed
    out = keepalive_run(s, a, "ka", "free.test", "plain")
    to = ADDRS["free.test"]
    check(out == "200 ok-from-%s | 200 ok-from-%s" % (to, to), "free.test answers: %r" % out)
    got = up.new()
    check(len(got) == 2 and got[0]["conn"] == got[1]["conn"],
          "an unbound host's keep-alive connection stays one: %r" % got)
    check(got[0]["head"] == "GET /public HTTP/1.1\r\nHost: free.test\r\n"
          "Accept-Encoding: identity\r\nContent-Type: application/json" and
          got[1]["head"].startswith("POST /v1/chat HTTP/1.1\r\nHost: free.test\r\n") and
          "onnection" not in got[1]["head"] and auth_of(got[1]) == [],
          "and byte for byte: %r" % got)


def tls(s, sid, to, sni, host, path="/v1/x", cafile="-", *extra):
    out, _ = s.run(sid, "python3 -c \"$(echo %s | base64 -d)\" %s %s %s '%s' %s %s" % (
        TLS_B64, to, sni, host, path, cafile, " ".join("'%s'" % h for h in extra)), timeout=60)
    return " ".join(out).strip()


class World:
    """The test's "internet": a network namespace with the upstream DNS and HTTP(S) servers
    of this file, on the /24 `net` ("203.0.113." here; the docker tests take their own, to run
    beside this one), reached from the host through a veth pair; `name` keeps concurrent tests'
    devices apart."""

    def __init__(self, tag, log, pki, net="203.0.113.", name="ci"):
        self.pki = pki
        self.net = net
        self.ns = "sbx%s-inet-%d" % (name, os.getpid())
        self.host_if = "%si%dh" % (name, tag)
        self.ns_if = "%si%dn" % (name, tag)
        self.log = log
        self.procs = []

    def at(self, text):
        """text with this file's addresses moved to the world's net."""
        return text.replace("203.0.113.", self.net)

    def sh(self, *argv):
        r = subprocess.run(list(argv), capture_output=True, text=True)
        check(r.returncode == 0, "%r: %s" % (argv, r.stderr))

    def up(self):
        host = self.net + "1"
        self.sh("ip", "netns", "add", self.ns)
        self.sh("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if,
                "netns", self.ns)
        self.sh("ip", "addr", "add", host + "/24", "dev", self.host_if)
        self.sh("ip", "link", "set", self.host_if, "up")
        nx = ["ip", "netns", "exec", self.ns]
        self.sh(*nx, "ip", "link", "set", "lo", "up")
        self.sh(*nx, "ip", "link", "set", self.ns_if, "up")
        for a in [self.at(UP)] + sorted(set(self.at(a) for a in ADDRS.values())):
            self.sh(*nx, "ip", "addr", "add", a + "/24", "dev", self.ns_if)
        self.sh(*nx, "ip", "route", "add", "default", "via", host)
        for argv in (["python3", "-c", self.at(DNS_SERVER)],
                     ["python3", "-c", self.at(HTTP_SERVER), self.log, self.pki]):
            p = subprocess.Popen(nx + argv, stdout=subprocess.PIPE, text=True)
            self.procs.append(p)
            check(p.stdout.readline().strip() == "ready", "a test peer did not start")

    def down(self):
        for p in self.procs:
            p.kill()
            p.wait()
        subprocess.run(["ip", "link", "del", self.host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)


class Upstream:
    """The heads the HTTP server logged."""

    def __init__(self, path):
        self.path = path
        self.seen = 0

    def new(self):
        """The heads logged since the last call."""
        try:
            with open(self.path) as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            lines = []
        out = [json.loads(x) for x in lines[self.seen:]]
        self.seen = len(lines)
        return out


def headers(head):
    """[(name lowercase, value)] of a logged head."""
    out = []
    for line in head.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        out.append((name.strip().lower(), value.strip()))
    return out


def send(s, sid, to, host, method="GET", path="/v1/x", *extra):
    out, _ = s.run(sid, "python3 -c \"$(echo %s | base64 -d)\" %s %s %s '%s' %s" % (
        SEND_B64, to, host, method, path, " ".join("'%s'" % h for h in extra)), timeout=60)
    return " ".join(out).strip()


def nft_elems(table, name):
    lib = ctypes.CDLL("libnftables.so.1")
    lib.nft_ctx_new.restype = ctypes.c_void_p
    lib.nft_ctx_get_output_buffer.restype = ctypes.c_char_p
    lib.nft_ctx_get_output_buffer.argtypes = [ctypes.c_void_p]
    lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.nft_ctx_buffer_output.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_output_set_flags.argtypes = [ctypes.c_void_p, ctypes.c_uint]
    lib.nft_ctx_free.argtypes = [ctypes.c_void_p]
    ctx = lib.nft_ctx_new(0)
    lib.nft_ctx_buffer_output(ctx)
    lib.nft_ctx_output_set_flags(ctx, 1 << 4)
    check(lib.nft_run_cmd_from_buffer(ctx, ("list set ip %s %s" % (table, name)).encode()) == 0,
          "nft list set " + name)
    out = json.loads(lib.nft_ctx_get_output_buffer(ctx).decode())
    lib.nft_ctx_free(ctx)
    return [e for item in out["nftables"] for e in item.get("set", {}).get("elem", [])]


def vault(s, sid, method, ha, body=None):
    return s.request(method, "/sandboxes/%s/proxy/18080/credential-vault" % sid, body=body,
                     headers=ha, key=False)


def cred(name, value):
    return {"name": name, "source": {"type": "inline", "value": value}}


def http_binding(name, hosts, auth, paths=None, methods=None):
    m = {"schemes": ["http"], "ports": [80], "hosts": hosts}
    if paths:
        m["paths"] = paths
    if methods:
        m["methods"] = methods
    return {"name": name, "match": m, "auth": auth}


def token(s, sid):
    ep = s.request("GET", "/v1/sandboxes/%s/endpoints/18080" % sid).json()
    return {"OPENSANDBOX-EGRESS-AUTH": ep["headers"]["OPENSANDBOX-EGRESS-AUTH"]}


def one_head(up, what):
    got = up.new()
    check(len(got) == 1, "%s: one request upstream, got %r" % (what, got))
    return got[0]


def no_secret(what, text):
    check(SECRET not in text and SECRET2 not in text and B64 not in text,
          "no credential value in %s" % what)


def injected(s, a, up):
    out = send(s, a, "api.test", "api.test", "GET", "/v1/models", "Authorization:Bearer mine")
    check("ok-from-" + ADDRS["api.test"] in out, "the sandbox gets the upstream's answer: %r" % out)
    no_secret("the answer the sandbox reads", out)
    h = one_head(up, "bearer")
    hs = headers(h["head"])
    check(h["to"] == ADDRS["api.test"], "sent to api.test's address: %r" % h)
    auths = [v for n, v in hs if n == "authorization"]
    check(auths == ["Bearer " + SECRET], "exactly the injected Authorization: %r" % auths)
    check(("connection", "close") in hs and not any(
        n == "connection" and v != "close" for n, v in hs), "Connection: close: %r" % hs)
    check(("host", "api.test") in hs and ("user-agent", "sbx-test") in hs,
          "the sandbox's other headers kept: %r" % hs)
    check(h["head"].startswith("GET /v1/models HTTP/1.1\r\n"), "the request line: %r" % h)
    # apiKey on another host, and customHeaders with two credentials
    out = send(s, a, "key.test", "key.test", "POST", "/anything", "X-Api-Key:mine")
    check("ok-from-" + ADDRS["key.test"] in out, "apiKey answer: %r" % out)
    hs = headers(one_head(up, "apiKey")["head"])
    check([v for n, v in hs if n == "x-api-key"] == [SECRET], "apiKey injected: %r" % hs)
    out = send(s, a, "multi.test", "multi.test", "GET", "/")
    hs = headers(one_head(up, "customHeaders")["head"])
    check([v for n, v in hs if n == "x-one"] == [SECRET] and
          [v for n, v in hs if n == "authorization"] == ["Basic " + B64],
          "customHeaders injected: %r" % hs)


def untouched(s, a, up):
    for args, what in ((("api.test", "api.test", "GET", "/v2/models"), "another path"),
                       (("api.test", "api.test", "DELETE", "/v1/models"), "another method"),
                       (("other.test", "other.test", "GET", "/v1/models"), "another host"),
                       (("api.test", "api.test", "GET", "/v1/../admin"), "a dot-segment path"),
                       (("api.test", "api.test", "GET", "/v1/%2e%2e/admin"), "an encoded one"),
                       (("api.test", "api.test", "GET", "/v1/..;/admin"),
                        "a dot segment with parameters (servlet containers read /admin)"),
                       (("api.test", "api.test", "GET", "/v1/#/../../admin"),
                        "a '#' before dot segments"),
                       (("api.test", "api.test:4294967376", "GET", "/v1/models"),
                        "a Host port that wraps to 80 in 32 bits")):
        out = send(s, a, *args, "Authorization:Bearer mine")
        check("ok-from-" in out, "%s: answered: %r" % (what, out))
        h = one_head(up, what)
        # a Host an http binding has (api.test): no credential, the sandbox's own header kept,
        # but `Connection: close` (the next request comes on a new connection); any other
        # (other.test, a Host whose port is not the connection's): byte for byte
        watched = args[1] == "api.test"
        want = ("%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sbx-test\r\nAuthorization: Bearer mine"
                "\r\nConnection: %s" % (args[2], args[3], args[1],
                                        "close" if watched else "keep-alive"))
        check(h["head"] == want, "%s: %s: %r" % (
            what, "no credential, closed" if watched else "byte for byte", h["head"]))
        no_secret(what, h["head"])


def spoofing(s, a, up):
    # evil.test is allowed (the sandbox may talk to it), its request claims api.test
    out = send(s, a, "evil.test", "api.test", "GET", "/v1/models")
    check("ok-from-" + ADDRS["evil.test"] in out, "evil.test answers: %r" % out)
    h = one_head(up, "spoofed Host")
    check(h["to"] == ADDRS["evil.test"], "it went to evil.test: %r" % h)
    no_secret("what evil.test got with Host: api.test", h["head"])
    check("authorization" not in dict(headers(h["head"])), "no Authorization at all: %r" % h)
    out = send(s, a, "evil.test", "API.TEST.", "GET", "/v1/models")
    no_secret("evil.test with Host: API.TEST.", one_head(up, "spoofed Host, other case")["head"])


def spoofing_allow_mode(s, b, up):
    """allow default: any address is reachable, so one api.test never resolved to (evil's) is
    the spoof; injection still works through the name."""
    out = send(s, b, "api.test", "api.test", "GET", "/v1/x")
    hs = headers(one_head(up, "allow mode")["head"])
    check([v for n, v in hs if n == "authorization"] == ["Bearer " + SECRET],
          "an allow-default sandbox is injected too: %r %r" % (out, hs))
    out = send(s, b, ADDRS["evil.test"], "api.test", "GET", "/v1/x")
    h = one_head(up, "allow mode, hard-coded address")
    check(h["to"] == ADDRS["evil.test"], "to evil's address: %r" % h)
    no_secret("evil's hard-coded address with Host: api.test", h["head"])


def live_changes(s, a, ha, up):
    r = vault(s, a, "PATCH", ha, {"credentials": {"replace": [cred("k", SECRET2)]}})
    check(r.status == 200, "PATCH a value: %r" % r)
    send(s, a, "api.test", "api.test", "GET", "/v1/x")
    hs = headers(one_head(up, "after a new value")["head"])
    check([v for n, v in hs if n == "authorization"] == ["Bearer " + SECRET2],
          "the new value at once: %r" % hs)
    r = vault(s, a, "PATCH", ha, {"bindings": {"delete": ["api"]}})
    check(r.status == 200, "PATCH delete a binding: %r" % r)
    send(s, a, "api.test", "api.test", "GET", "/v1/x")
    h = one_head(up, "after deleting the binding")
    check("authorization" not in dict(headers(h["head"])), "not injected any more: %r" % h)
    check("keep-alive" in h["head"], "and untouched: %r" % h)


HOLD = r'''
import socket, time
# 200 connections to api.test:80 that never send a head
held = []
for i in range(200):
    try: held.append(socket.create_connection(("api.test", 80), timeout=2))
    except OSError: pass
print("held", len(held), flush=True)
time.sleep(4)
'''


def bounds(s, a, up):
    """A head over 16 KiB passes untouched (no credential); 200 silent connections: the
    server's threads stay bounded and a request after them is injected."""
    big = "X-Big:" + "b" * 20000
    out = send(s, a, "api.test", "api.test", "GET", "/v1/x", big)
    check("ok-from-" in out, "a 20 kB head is answered: %.80r" % out)
    h = one_head(up, "a 20 kB head")
    check("Bearer" not in h["head"] and "keep-alive" in h["head"],
          "a head over the limit is relayed untouched: %.200r" % h["head"])
    script = base64.b64encode(HOLD.encode()).decode()
    t0 = time.time()
    s.run(a, "python3 -c \"$(echo %s | base64 -d)\" > /tmp/hold.out &" % script)
    threads = 0
    for _ in range(30):
        time.sleep(0.1)
        threads = max(threads, len(os.listdir("/proc/%d/task" % s.proc.pid)))
    check(threads < 250, "the server's threads stay bounded: %d" % threads)
    time.sleep(max(0, 4.5 - (time.time() - t0)))
    out, _ = s.run(a, "cat /tmp/hold.out")
    check(" ".join(out).startswith("held"), "the connections were made: %r" % out)
    print("threads with 200 silent connections: %d" % threads)
    ok = False
    for _ in range(30):  # the held ones end at the head timeout (10 s) or when they close
        out = send(s, a, "api.test", "api.test", "GET", "/v1/x")
        got = up.new()
        if "ok-from-" in out and any("Bearer " + SECRET in g["head"] for g in got):
            ok = True
            break
        time.sleep(0.5)
    check(ok, "injection works after the flood")
    up.new()


def restart(s, a, up):
    """kill -9: the sandbox stays redirected while the server is down (its port-80 connects
    fail: the listener is gone), and after the restart it is injected again once it
    resolves anew (the pairs were in memory)."""
    s.kill9()
    s.start()
    send(s, a, "api.test", "api.test", "GET", "/v1/x")
    hs = headers(one_head(up, "after a restart")["head"])
    check([v for n, v in hs if n == "authorization"] == ["Bearer " + SECRET],
          "injected after a server restart: %r" % hs)
    out = tls(s, a, "api.test", "api.test", "api.test", "/v1/x", "-")
    hs = headers(one_head(up, "HTTPS after a restart")["head"])
    check(out.startswith("ISSUER=sbx_credential_proxy") and
          [v for n, v in hs if n == "authorization"] == ["Bearer " + SECRET],
          "HTTPS after a restart: the same CA (kept encrypted), injected: %r %r" % (out, hs))


def https(s, a, up, pki):
    """HTTPS through the proxy: a matched name is terminated with a leaf of the sandbox's own
    CA (which its bundle trusts), injected, and sent on over TLS verified against the test's
    CA; anything else is spliced untouched (the upstream's own certificate reaches the
    sandbox)."""
    with open(os.path.join(pki, "ca.pem")) as f:
        ca = base64.b64encode(f.read().encode()).decode()
    s.run(a, "echo %s | base64 -d > /tmp/testca.pem" % ca)
    env = " ".join(s.run(a, "env")[0])
    check("SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt" in env and
          "NODE_EXTRA_CA_CERTS=" in env, "the sandbox's env names its bundle: %r" % env[:300])
    out = tls(s, a, "api.test", "api.test", "api.test", "/v1/models", "-",
              "Authorization:Bearer mine")
    check(out.startswith("ISSUER=sbx_credential_proxy_" + a[:8]) and
          "ok-from-" + ADDRS["api.test"] + "/tls" in out,
          "an HTTPS request to a bound name, verified by the sandbox: %r" % out)
    no_secret("the HTTPS answer the sandbox reads", out)
    h = one_head(up, "HTTPS bearer")
    hs = headers(h["head"])
    check(h["to"] == ADDRS["api.test"] + "/tls", "over TLS to api.test: %r" % h)
    check([v for n, v in hs if n == "authorization"] == ["Bearer " + SECRET] and
          ("connection", "close") in hs, "injected over HTTPS: %r" % hs)
    # a name no binding has: spliced, the upstream's certificate (the test CA's) end to end
    out = tls(s, a, "other.test", "other.test", "other.test", "/v1/models", "/tmp/testca.pem")
    check(out.startswith("ISSUER=sbx_test_upstream_CA") and "ok-from-" in out,
          "an unbound name is spliced untouched: %r" % out)
    h = one_head(up, "HTTPS spliced")
    check("keep-alive" in h["head"] and "Bearer" not in h["head"], "untouched: %r" % h)
    # the bound name's path that does not match: terminated, not injected
    out = tls(s, a, "api.test", "api.test", "api.test", "/v2/x", "-")
    h = one_head(up, "HTTPS unmatched path")
    check("ok-from-" in out and "Bearer" not in h["head"] and "keep-alive" not in h["head"] and
          h["head"].endswith("\r\nConnection: close"),
          "HTTPS, another path: no credential, `Connection: close`: %r %r" % (out, h))
    # Host other than the SNI name (both bound, same address): never injected
    out = tls(s, a, "alias.test", "alias.test", "api.test", "/v1/x", "-")
    h = one_head(up, "HTTPS Host other than SNI")
    check("ok-from-" in out, "answered: %r" % out)
    no_secret("a request whose Host is not its SNI", h["head"])
    # the spoof: evil.test's address with SNI and Host api.test: spliced (evil's own TLS)
    out = tls(s, a, "evil.test", "api.test", "api.test", "/v1/x", "/tmp/testca.pem")
    h = one_head(up, "HTTPS spoof")
    check(h["to"] == ADDRS["evil.test"] + "/tls" and out.startswith("ISSUER=sbx_test_upstream"),
          "the spoofed connection went to evil.test, spliced: %r %r" % (out, h))
    no_secret("what evil.test got over TLS with SNI api.test", h["head"])
    # an upstream whose certificate does not verify: the proxy sends nothing
    out = tls(s, a, "bad.test", "bad.test", "bad.test", "/v1/x", "-")
    check(out.startswith("ISSUER=sbx_credential_proxy") and "ok-from-" not in out,
          "bad.test: terminated by the proxy, then closed without an answer: %r" % out)
    check(up.new() == [], "nothing reached an upstream that did not verify")


def sandbox_sees_nothing(s, a):
    for what, cmd in (("env", "env; cat /proc/[0-9]*/environ | tr '\\0' '\\n'; echo scanned"),
                      ("files", "grep -rlsF -e '%s' -e '%s' /etc /tmp /root /home 2>/dev/null "
                                "| head -3; echo scanned" % (SECRET, SECRET2))):
        out, _ = s.run(a, cmd, timeout=120)
        text = "\n".join(out)
        check("scanned" in text, "the %s check ran" % what)
        no_secret("the sandbox's " + what, text)


def vault_setup(s, a, ha):
    body = {"credentials": [cred("k", SECRET), cred("b64", B64)],
            "bindings": [http_binding("api", ["api.test"], {"type": "bearer", "credential": "k"},
                                      paths=["/v1/*"], methods=["GET", "POST"]),
                         http_binding("ka", ["ka.test"], {"type": "bearer", "credential": "k"},
                                      paths=["/v1/*"], methods=["GET", "POST"]),
                         http_binding("key", ["*.key.test", "key.test"],
                                      {"type": "apiKey", "name": "X-Api-Key", "credential": "k"}),
                         http_binding("multi", ["multi.test"], {"type": "customHeaders", "headers": [
                             {"name": "X-One", "credential": "k"},
                             {"name": "Authorization", "credential": "b64"}]})]}
    # (customHeaders' Authorization carries the value as is: "Basic ..." is in the value)
    body["credentials"][1] = cred("b64", "Basic " + B64)
    r = vault(s, a, "POST", ha, body)
    check(r.status == 201, "POST a vault with http bindings: %r" % r)
    no_secret("the POST answer", r.body.decode())
    # HTTPS: the spec's defaults (schemes [https], ports [443])
    r = vault(s, a, "PATCH", ha, {"bindings": {"add": [{
        "name": "tls", "match": {"hosts": ["api.test", "bad.test", "alias.test", "ka.test"],
                                 "paths": ["/v1/*"]},
        "auth": {"type": "bearer", "credential": "k"}}]}})
    check(r.status == 200, "an HTTPS binding: %r" % r)
    r = vault(s, a, "PATCH", ha, {"bindings": {"add": [http_binding(
        "p", ["api.test"], {"type": "bearer", "credential": "k"})]}})
    check(r.status == 200, "control: an http one is added: %r" % r)
    bad = http_binding("p8080", ["api.test"], {"type": "bearer", "credential": "k"})
    bad["match"]["ports"] = [8080]
    r = vault(s, a, "PATCH", ha, {"bindings": {"add": [bad]}})
    check(r.status == 400 and "port" in r.json()["message"], "port 8080 refused: %r" % r)
    r = vault(s, a, "PATCH", ha, {"bindings": {"delete": ["p"]}})
    check(r.status == 200, "delete p: %r" % r)


def test(new_server):
    tag = os.getpid() % 200 + 20
    bridge = "sbxci%d" % tag
    subnet = "10.234.%d.0/24" % tag
    pki = tempfile.mkdtemp(prefix="sbx-credinject-pki-")
    make_pki(pki)
    config = ('providers = { supported = ["native"]; default = "native";\n'
              '  native = { bridge = "%s"; subnet = "%s"; egress_dns = "%s";\n'
              '    credproxy_upstream_ca = "%s/ca.pem"; }; };\n'
              % (bridge, subnet, UP, pki))
    s = new_server(config_text=config, tag="credinject")
    fd, log = tempfile.mkstemp(prefix="sbx-credinject-upstream-")
    os.close(fd)
    world = World(tag, log, pki)
    up = Upstream(log)
    try:
        world.up()
        s.start_native()
        pol = {"defaultAction": "deny", "egress": [
            {"action": "allow", "target": t} for t in ("api.test", "evil.test", "other.test",
                                                       "key.test", "multi.test", "bad.test",
                                                       "alias.test", "ka.test", "free.test")]}
        r = s.create(networkPolicy=pol, credentialProxy={"enabled": True})
        if r.status != 202:
            raise Skip("the runtime cannot make sandboxes on this host: %r" % r)
        a = r.json()["id"]
        r = s.create(networkPolicy={"defaultAction": "allow"}, credentialProxy={"enabled": True})
        check(r.status == 202, "create b (allow default): %r" % r)
        b = r.json()["id"]
        r = s.create(networkPolicy=pol)
        check(r.status == 202, "create c (no vault): %r" % r)
        c = r.json()["id"]
        ha = token(s, a)
        # before any vault: nothing is redirected (control for what follows)
        send(s, a, "api.test", "api.test", "GET", "/v1/x")
        h = one_head(up, "no vault yet")
        check("keep-alive" in h["head"], "no vault: untouched: %r" % h)
        vault_setup(s, a, ha)
        t0 = time.time()
        injected(s, a, up)
        print("three injected requests: %.2f s" % (time.time() - t0))
        t0 = time.time()
        https(s, a, up, pki)
        print("https: %.2f s" % (time.time() - t0))
        untouched(s, a, up)
        t0 = time.time()
        keepalive(s, a, up)
        print("keep-alive: %.2f s" % (time.time() - t0))
        spoofing(s, a, up)
        r = vault(s, b, "POST", token(s, b), {"credentials": [cred("k", SECRET)], "bindings": [
            http_binding("api", ["api.test"], {"type": "bearer", "credential": "k"})]})
        check(r.status == 201, "b's vault: %r" % r)
        spoofing_allow_mode(s, b, up)
        # c (same policy, no vault) is never redirected: its own header stays
        send(s, c, "api.test", "api.test", "GET", "/v1/x", "Authorization:Bearer c-own")
        h = one_head(up, "no vault")
        check("Authorization: Bearer c-own" in h["head"] and "keep-alive" in h["head"],
              "a sandbox without a vault: untouched: %r" % h)
        sandbox_sees_nothing(s, a)
        t0 = time.time()
        bounds(s, a, up)
        print("bounds: %.1f s" % (time.time() - t0))
        restart(s, a, up)
        live_changes(s, a, ha, up)
        table = "sbx_" + bridge
        check(len(nft_elems(table, "credproxy4")) == 2, "control: a and b are in credproxy4")
        for sid in (a, b, c):
            check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
        for sid in (a, b, c):
            s.wait_native_gone(sid)
        deadline = time.time() + 10
        while nft_elems(table, "credproxy4") and time.time() < deadline:
            time.sleep(0.1)
        left = nft_elems(table, "credproxy4")
        check(not left, "deleted sandboxes leave nothing in credproxy4: %r" % left)
        no_secret("the server's log", s.log(full=True))
        t0 = time.time()
        check(s.stop() == 0, "clean stop")
        print("stop: %.1f s" % (time.time() - t0))
    finally:
        s.kill9()
        s.gc_runtime()
        world.down()
        subprocess.run(["rm", "-rf", log, pki], capture_output=True)
        remove_bridge(s.sbx, bridge, subnet)  # its leaf bridges too


if __name__ == "__main__":
    main(test)
