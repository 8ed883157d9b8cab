#!/usr/bin/env python3
"""credentialProxy on the docker provider (plain HTTP), against a real engine (a private
dockerd, else podman, started and stopped by PID) with real traffic on this machine only: the
"internet" of server/test_credinject.py (a network namespace with an upstream DNS server and an
HTTP server that logs every request head and echoes none of it; its peers moved to 198.18.7.0/24
here, so that server/credinject can run beside this test), containers on
sbx's bridge (network "sbx"). The proxy's listener is made inside each container's network
namespace and its table redirects the container's port 80 to it; the requests are made by
processes of the container itself (BusyBox: nc, its resolv.conf):

- before any vault: nothing redirected (no `proxy` chain); an https binding is accepted (its
  injection: test_credproxy_https_docker.py);
- a matching request gets exactly the injected header (the container's own copy removed,
  `Connection: close`); the answer the container reads holds no value;
- another path of a bound host goes as it came but with `Connection: close` (keep-alive: the
  next request comes on a new connection and is decided on); an unbound host's passes byte for
  byte, keep-alive included (two requests, one upstream connection); two requests pipelined
  to a bound host: the second, never checked, never gets a credential (its upstream serves
  it despite the close); a container without a vault is never redirected;
- the Host-spoofing attack: evil.test (allowed) with `Host: api.test` gets nothing;
- a connection straight to the proxy's listener (no original destination) gets nothing and
  reaches nobody;
- the proxy reaches nothing the container could not: an allow-default container connecting
  to the host's own address (the bridge refuses it) with a bound Host gets nowhere, though a
  listener there would have answered a proxy connecting from the host;
- the value is not in the container (environment, files);
- kill -9 of the server: while it is down the container's port-80 traffic is refused (never
  sent around the proxy), and a process of the container that takes the listener's old port
  (when the old connections' TIME-WAIT lets it) gets only the container's own request; after the restart the redirect names a new listener
  (a port the kernel picked: not the squatter's) and requests are injected again once the
  container resolved the name again;
- a live value change and a deleted binding; stop/start (a new namespace: injected again);
- delete: the server's descriptors back, no value in the server's log, a clean stop.

  test_credproxy_docker.py SBX ENGINE      ENGINE: dockerd or podman (the other the fallback)
"""
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
sys.path.insert(0, HERE)

import engine as eng  # noqa: E402
import test_credinject as ci  # noqa: E402  (server/test_credinject.py: the test's "internet")
from harness import check, main, remove_bridge, wait_for  # noqa: E402
from test_egress_docker import NFT_LIST, create, in_ns, server_fds, sh  # noqa: E402
from test_egress_docker import pid_of as T_pid  # noqa: E402

NET = "198.18.7."  # (server/credinject's peers are on 203.0.113.0/24)
ADDRS = {k: v.replace("203.0.113.", NET) for k, v in ci.ADDRS.items()}
UP = ci.UP.replace("203.0.113.", NET)
SECRET, SECRET2 = ci.SECRET, ci.SECRET2
HOST_ADDR = NET + "1"  # the host's end of the test's "internet"


def send(s, sid, to, host, path="/v1/x", extra=""):
    """From a process of the container: one HTTP/1.1 request (keep-alive asked for) with nc;
    to: a name (the container's resolver) or an address."""
    req = ("GET %s HTTP/1.1\\r\\nHost: %s\\r\\nUser-Agent: sbx-test\\r\\n%sConnection: "
           "keep-alive\\r\\n\\r\\n" % (path, host, extra))
    # (BusyBox's nc closes the connection at its input's end: the input stays open 1 s)
    return sh(s, sid, "(printf '%s'; sleep 1) | nc -w 3 %s 80 2>&1; echo rc=$?" % (req, to))


def table(e, sid):
    return in_ns(e, sid, NFT_LIST)


def proxy_port(e, sid):
    m = re.search(r"tcp dport 80 redirect to :(\d+)", table(e, sid))
    return int(m.group(1)) if m else None


def auths(h):
    return [v for n, v in ci.headers(h["head"]) if n == "authorization"]


def vault_setup(s, a, ha):
    r = ci.vault(s, a, "POST", ha, {"credentials": [ci.cred("k", SECRET)], "bindings": [
        ci.http_binding("api", ["api.test"], {"type": "bearer", "credential": "k"},
                        paths=["/v1/*"]),
        ci.http_binding("ka", ["ka.test"], {"type": "bearer", "credential": "k"},
                        paths=["/v1/*"], methods=["POST"])]})
    check(r.status == 201, "POST a vault with an http binding: %r" % r)
    ci.no_secret("the POST answer", r.body.decode())
    r = ci.vault(s, a, "PATCH", ha, {"bindings": {"add": [{
        "name": "tls", "match": {"hosts": ["api.test"]},
        "auth": {"type": "bearer", "credential": "k"}}]}})
    check(r.status == 200, "an https binding is accepted on docker: %r" % r)
    r = ci.vault(s, a, "PATCH", ha, {"bindings": {"delete": ["tls"]}})
    check(r.status == 200, "delete the https binding: %r" % r)
    r = ci.vault(s, a, "GET", ha)
    check(r.status == 200 and [b["name"] for b in r.json()["bindings"]] == ["api", "ka"],
          "the https binding deleted again: %r" % r)


def injected(s, e, a, up, value=SECRET, what="bearer"):
    out = send(s, a, "api.test", "api.test", extra="Authorization: Bearer mine\\r\\n")
    check("ok-from-" + ADDRS["api.test"] in out, "%s: the upstream's answer: %r" % (what, out))
    ci.no_secret("the answer the container reads", out)
    h = ci.one_head(up, what)
    hs = ci.headers(h["head"])
    check(h["to"] == ADDRS["api.test"], "%s: sent to api.test's address: %r" % (what, h))
    check(auths(h) == ["Bearer " + value], "%s: exactly the injected value: %r" % (what, hs))
    check(("connection", "close") in hs and ("user-agent", "sbx-test") in hs,
          "%s: Connection: close, the other headers kept: %r" % (what, hs))


def untouched(s, a, up):
    send(s, a, "api.test", "api.test", "/v2/x", "Authorization: Bearer mine\\r\\n")
    h = ci.one_head(up, "another path")
    want = ("GET /v2/x HTTP/1.1\r\nHost: api.test\r\nUser-Agent: sbx-test\r\nAuthorization: "
            "Bearer mine\r\nConnection: close")
    check(h["head"] == want, "another path of a bound host: as it came but `Connection: close` "
          "(keep-alive: the next request on a new connection): %r" % h["head"])
    send(s, a, "other.test", "other.test", "/v1/x", "Authorization: Bearer mine\\r\\n")
    h = ci.one_head(up, "an unbound host")
    want = ("GET /v1/x HTTP/1.1\r\nHost: other.test\r\nUser-Agent: sbx-test\r\nAuthorization: "
            "Bearer mine\r\nConnection: keep-alive")
    check(h["head"] == want, "an unbound host: byte for byte: %r" % h["head"])


def keepalive(s, a, ha, up):
    """Two requests written at once on one connection (pipelined, nc) to ka.test, whose upstream
    serves the second despite the close: the first decided on (closed; the credential when it
    matches), the second never checked and never given one. An unbound host's keep-alive
    connection (a second request after the first's answer): one upstream connection, both
    requests byte for byte."""
    for pair in (("GET /public", "POST /v1/chat"), ("POST /v1/chat", "POST /v1/other")):
        req = "".join("%s HTTP/1.1\\r\\nHost: ka.test\\r\\nContent-Length: 2\\r\\n\\r\\n{}" % r
                      for r in pair)
        out = sh(s, a, "(printf '%s'; sleep 1) | nc -w 3 ka.test 80 2>&1; echo rc=$?" % req)
        ci.no_secret("the pipelined answers", out)
        got = up.new()
        check(len(got) == 2 and got[0]["conn"] == got[1]["conn"],
              "pipelined %r: the sloppy upstream served both on one connection: %r" % (pair, got))
        want = ["Bearer " + SECRET] if pair[0].startswith("POST") else []
        check(auths(got[0]) == want and ("connection", "close") in ci.headers(got[0]["head"]),
              "pipelined %r: the first decided on, closed: %r" % (pair, got[0]))
        check(got[1]["head"] == "%s HTTP/1.1\r\nHost: ka.test\r\nContent-Length: 2" % pair[1],
              "pipelined %r: the second as it came, no credential: %r" % (pair, got[1]))
    req = "GET /%s HTTP/1.1\\r\\nHost: free.test\\r\\nConnection: keep-alive\\r\\n\\r\\n"
    out = sh(s, a, "(printf '%s'; sleep 0.5; printf '%s'; sleep 1) | nc -w 3 free.test 80 2>&1"
             % (req % "a", req % "b"))
    check(out.count("ok-from-" + ADDRS["free.test"]) == 2, "free.test answers both: %r" % out)
    got = up.new()
    check(len(got) == 2 and got[0]["conn"] == got[1]["conn"] and [g["head"] for g in got] == [
        "GET /%s HTTP/1.1\r\nHost: free.test\r\nConnection: keep-alive" % p for p in "ab"],
        "an unbound host's keep-alive connection: one, byte for byte: %r" % got)
    r = ci.vault(s, a, "PATCH", ha, {"bindings": {"delete": ["ka"]}})
    check(r.status == 200, "PATCH delete ka (what follows has api alone): %r" % r)


def spoofing(s, a, up):
    out = send(s, a, "evil.test", "api.test")
    check("ok-from-" + ADDRS["evil.test"] in out, "evil.test answers: %r" % out)
    h = ci.one_head(up, "spoofed Host")
    check(h["to"] == ADDRS["evil.test"] and not auths(h), "evil.test gets nothing: %r" % h)
    ci.no_secret("what evil.test got with Host: api.test", h["head"])


def straight_to_listener(s, e, a, up):
    port = proxy_port(e, a)
    check(port, "the redirect names the listener: %s" % table(e, a))
    req = "GET /v1/x HTTP/1.1\\r\\nHost: api.test\\r\\n\\r\\n"
    out = sh(s, a, "(printf '%s'; sleep 1) | nc -w 3 127.0.0.1 %d 2>&1; echo rc=$?" % (req, port))
    check("ok-from" not in out, "a connection straight to the proxy gets nothing: %r" % out)
    time.sleep(0.3)
    check(up.new() == [], "... and nothing goes upstream")
    return port


class HostListener:
    """A listener on the host's own address of the test's "internet": what a proxy connecting
    from the host's namespace would reach."""

    def __init__(self):
        self.got = []
        self.s = socket.socket()
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.s.bind((HOST_ADDR, 80))
        self.s.listen(8)
        threading.Thread(target=self.loop, daemon=True).start()

    def loop(self):
        while True:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            c.settimeout(2)
            try:
                self.got.append(c.recv(4096))
                c.sendall(b"HTTP/1.0 200 OK\r\n\r\nhost-answered")
            except OSError:
                pass
            c.close()


def no_wider_reach(s, e, b):
    """The proxy's upstream connection is made in the container's namespace: it meets the
    bridge's isolation as the container does (the host's addresses refused)."""
    try:
        hl = HostListener()
    except OSError as ex:
        print("note: no listener on %s:80 (%s): not checked" % (HOST_ADDR, ex))
        return
    try:
        with socket.create_connection((HOST_ADDR, 80), timeout=3) as c:
            c.sendall(b"GET / HTTP/1.0\r\n\r\n")
            check(b"host-answered" in c.recv(4096), "control: the host's listener answers")
        hl.got.clear()
        out = send(s, b, HOST_ADDR, "api.test")
        check("host-answered" not in out and not hl.got,
              "the proxy does not reach the host's own address for the container: %r %r"
              % (out, hl.got))
    finally:
        hl.s.close()


# In the container's namespace (host python through nsenter -n: the router is down with the
# server): one request to ADDR:80 -> the answer, or "FAIL why".
CONNECT = r'''
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], 80), timeout=3)
    c.sendall(b"GET /v1/x HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n")
    print(c.recv(4096).decode("latin-1") or "FAIL closed")
except OSError as e:
    print("FAIL %s" % e)
'''


# In the container's namespace: a process that takes the proxy's old port while the server is
# down; prints what each connection sent (repr), one line each.
SQUAT = r'''
import socket, sys
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    l.bind(("127.0.0.1", int(sys.argv[1]))); l.listen(8)
except OSError as e:
    print("FAIL %s" % e, flush=True); sys.exit()
print("listening", flush=True)
while True:
    c, _ = l.accept(); c.settimeout(2)
    try: print(repr(c.recv(65536)), flush=True)
    except OSError: pass
    c.close()
'''


def restart(s, e, a, up, port):
    s.kill9()
    out = in_ns(e, a, CONNECT, ADDRS["api.test"])
    check(out.startswith("FAIL"), "while the server is down, port 80 is refused: %r" % out)
    check(up.new() == [], "... nothing went around the proxy")
    # a process of the container takes the listener's old port meanwhile: it gets the
    # container's own connections, nothing of the server's
    sq = subprocess.Popen(["nsenter", "-t", str(T_pid(e, a)), "-n", "python3", "-c", SQUAT,
                           str(port)], stdout=subprocess.PIPE, text=True)
    try:
        # (the old listener's connections in TIME-WAIT, made without SO_REUSEADDR, keep the
        # port from anyone for a minute: then there is nothing to squat)
        squatted = sq.stdout.readline().strip() == "listening"
        if squatted:
            in_ns(e, a, CONNECT, ADDRS["api.test"])
        else:
            print("note: the old port %d cannot be taken yet (TIME-WAIT)" % port)
        s.start()
        wait_for(lambda: proxy_port(e, a) not in (None, port), "a new listener after the "
                 "restart (%s)" % table(e, a), 30)
        injected(s, e, a, up, what="after kill -9 and a restart")
    finally:
        sq.kill()
        got = sq.communicate()[0]
    if squatted:
        check("Host: api.test" in got, "the squatter got the container's own request: %r" % got)
    ci.no_secret("what the squatter got", got)


def live_changes(s, e, a, ha, up):
    r = ci.vault(s, a, "PATCH", ha, {"credentials": {"replace": [ci.cred("k", SECRET2)]}})
    check(r.status == 200, "PATCH a value: %r" % r)
    injected(s, e, a, up, value=SECRET2, what="a new value")
    r = ci.vault(s, a, "PATCH", ha, {"bindings": {"delete": ["api"]}})
    check(r.status == 200, "PATCH delete the binding: %r" % r)
    check(proxy_port(e, a) is None, "no binding: no redirect: %s" % table(e, a))
    send(s, a, "api.test", "api.test", extra="Authorization: Bearer mine\\r\\n")
    h = ci.one_head(up, "after deleting the binding")
    check(auths(h) == ["Bearer mine"] and "keep-alive" in h["head"], "untouched: %r" % h)
    r = ci.vault(s, a, "PATCH", ha, {"bindings": {"add": [ci.http_binding(
        "api", ["api.test"], {"type": "bearer", "credential": "k"}, paths=["/v1/*"])]}})
    check(r.status == 200, "PATCH the binding back: %r" % r)
    injected(s, e, a, up, value=SECRET2, what="the binding back")


def stop_start(s, e, a, up):
    check(s.request("POST", "/v1/sandboxes/%s/stop" % a).status == 202, "stop a")
    wait_for(lambda: s.request("GET", "/v1/sandboxes/" + a).json()["status"]["state"] ==
             "Stopped", "a stopped", 60)
    check(s.request("POST", "/v1/sandboxes/%s/start" % a).status == 202, "start a")
    wait_for(lambda: s.request("GET", "/v1/sandboxes/" + a).json()["status"]["state"] ==
             "Running", "a running again", 60)
    injected(s, e, a, up, value=SECRET2, what="after stop and start")


def sees_nothing(s, a):
    for what, cmd in (("env", "env; cat /proc/[0-9]*/environ | tr '\\0' '\\n'; echo scanned"),
                      ("files", "grep -rlsF -e '%s' -e '%s' /etc /tmp /root 2>/dev/null "
                                "| head -3; echo scanned" % (SECRET, SECRET2))):
        out = sh(s, a, cmd, timeout=120)
        check("scanned" in out, "the %s check ran" % what)
        ci.no_secret("the container's " + what, out)


def run(new_server, setup, tag, up):
    e = setup.engine
    e.image = setup.image
    bridge, subnet = "sbxdc%d" % tag, "10.235.%d.0/24" % tag
    s = new_server(config_text=(
        'providers = { supported = ["docker"]; default = "docker";\n'
        '  docker = { socket = "%s"; cgroup_parent = "%s"; stop_timeout_s = 2;\n'
        '             bridge = "%s"; subnet = "%s"; egress_dns = "%s"; }; };\n'
        % (e.socket, e.cgroup_parent, bridge, subnet, UP)), tag="docker-credproxy")
    pol = {"defaultAction": "deny", "egress": [
        {"action": "allow", "target": t} for t in ("api.test", "evil.test", "other.test",
                                                   "ka.test", "free.test")]}
    try:
        s.start()
        r = create(s, e, networkPolicy={"defaultAction": "deny"}, credentialProxy={"enabled": True})
        check(r.status == 202, "create: %r" % r)
        check(s.request("DELETE", "/v1/sandboxes/" + r.json()["id"]).status == 204, "delete")
        fds0 = server_fds(s)
        r = create(s, e, networkPolicy=pol, credentialProxy={"enabled": True})
        check(r.status == 202, "create a: %r" % r)
        a = r.json()["id"]
        r = create(s, e, networkPolicy={"defaultAction": "allow"}, credentialProxy={"enabled": True})
        check(r.status == 202, "create b (allow default): %r" % r)
        b = r.json()["id"]
        r = create(s, e, networkPolicy=pol)
        check(r.status == 202, "create c (no vault): %r" % r)
        c = r.json()["id"]
        ha = ci.token(s, a)
        send(s, a, "api.test", "api.test")
        h = ci.one_head(up, "no vault yet")
        check("keep-alive" in h["head"], "no vault: untouched: %r" % h)
        check("chain proxy" not in table(e, a), "no vault: no redirect: %s" % table(e, a))
        vault_setup(s, a, ha)
        t0 = time.time()
        injected(s, e, a, up)
        print("an injected request (nc in the container): %.2f s" % (time.time() - t0))
        untouched(s, a, up)
        keepalive(s, a, ha, up)
        spoofing(s, a, up)
        port = straight_to_listener(s, e, a, up)
        send(s, c, "api.test", "api.test", extra="Authorization: Bearer c-own\\r\\n")
        h = ci.one_head(up, "no vault")
        check(auths(h) == ["Bearer c-own"] and "keep-alive" in h["head"],
              "a container without a vault: untouched: %r" % h)
        r = ci.vault(s, b, "POST", ci.token(s, b), {"credentials": [ci.cred("k", SECRET)],
                                                     "bindings": [ci.http_binding(
            "api", ["api.test"], {"type": "bearer", "credential": "k"})]})
        check(r.status == 201, "b's vault: %r" % r)
        no_wider_reach(s, e, b)
        sees_nothing(s, a)
        restart(s, e, a, up, port)
        live_changes(s, e, a, ha, up)
        stop_start(s, e, a, up)
        for sid in (a, b, c):
            check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
        wait_for(lambda: server_fds(s) <= fds0 + 1, "the server's descriptors back to %d (now "
                 "%d)" % (fds0, server_fds(s)), 15)
        ci.no_secret("the server's log", s.log(full=True))
        check(s.stop() == 0, "clean stop")
    finally:
        s.kill9()
        e.remove_all()
        remove_bridge(s.sbx, bridge, subnet)  # its leaf bridges too


def test(new_server):
    setup = eng.Setup(sys.argv[2] if len(sys.argv) > 2 else "dockerd")
    tag = os.getpid() % 200 + 20
    pki = tempfile.mkdtemp(prefix="sbx-dcred-pki-")
    ci.make_pki(pki)
    fd, log = tempfile.mkstemp(prefix="sbx-dcred-upstream-")
    os.close(fd)
    world = ci.World(tag, log, pki, net=NET, name="dc")

    def body(_):
        world.up()
        try:
            run(new_server, setup, tag, ci.Upstream(log))
        finally:
            world.down()

    setup.run_test(body, cleanup=lambda: subprocess.run(["rm", "-rf", log, pki],
                                                        capture_output=True))


if __name__ == "__main__":
    main(test)
