#!/usr/bin/env python3
"""PTY sessions through the router (COMPAT 2.6 behind /sandboxes/{id}/proxy/44772): the
endpoint the SDKs resolve, create, attach over WebSocket with the endpoint's headers, a shell's
output and exit code, 409 and takeover (close code 4001 passes through), a viewer, replay after
a reconnect, the API key required, /v1 prefix too.
"""
import os
import sys

from harness import check, main, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, "..", "desktop"))
sys.path.append(os.path.join(HERE, "..", "execd"))
# ptyclient imports `harness`: it gets this one (check, Fail)
from cdp import HandshakeError  # noqa: E402
from ptyclient import Term  # noqa: E402


class Via:
    """What test_pty.Term needs of an execd: host, port, headers; paths under the endpoint."""

    def __init__(self, s, prefix, headers):
        self.host, self.port = "127.0.0.1", s.port
        self.prefix = prefix
        self.hdrs = headers

    def headers(self):
        return dict(self.hdrs)


def term(via, sid, query=""):
    return Term(via, sid, query, path="%s/pty/%s" % (via.prefix, sid))


def run(factory):
    s = factory()
    s.start()
    r = s.create()
    check(r.status == 202, "create: %r" % r)
    sb = r.json()["id"]
    wait_for(lambda: s.request("GET", "/v1/sandboxes/" + sb).json()["status"]["state"] ==
             "Running", "the sandbox running")
    ep = s.request("GET", "/v1/sandboxes/%s/endpoints/44772" % sb).json()
    # the SDKs: "<endpoint>/pty" with the endpoint's headers on every request
    host, _, path = ep["endpoint"].partition("/")
    check(host == "127.0.0.1:%d" % s.port, "endpoint %r" % ep)
    prefix = "/" + path
    r = s.request("POST", prefix + "/pty", {"command": "stty size; echo routed-$((40+2)); "
                                            "read x; echo got-$x; exit 5"},
                  headers=ep["headers"], key=False)
    check(r.status == 201, "create through the router: %r" % r)
    sid = r.json()["session_id"]
    via = Via(s, prefix, ep["headers"])
    t = term(via, sid, "?cols=77&rows=11")
    t.wait_out("11 77")
    t.wait_out("routed-42")
    try:
        term(via, sid)
        raise AssertionError("second client let in")
    except HandshakeError as e:
        check(e.status == 409, "second client through the router: %d" % e.status)
    v = term(via, sid, "?viewer=1&since=0")
    v.wait_out("routed-42")
    t2 = term(via, sid, "?takeover=1")
    check(t.wait_close() == 4001, "takeover close code through the router: %r" % t.close_code)
    t2.stdin("hello\n")
    check(t2.wait_msg("exit")["exit_code"] == 5, "exit through the router")
    t2.wait_out("got-hello")
    v.wait_out("got-hello")
    check(t2.wait_close() == 1000, "close 1000")
    info = s.request("GET", prefix + "/pty/" + sid, headers=ep["headers"], key=False).json()
    check(info["running"] is False and info["output_offset"] > 0, "status %r" % info)
    # replay after the end, under /v1 as well
    v1 = Via(s, "/v1/sandboxes/%s/proxy/44772" % sb, ep["headers"])
    r = term(v1, sid, "?since=0")
    r.wait_close()
    check(b"routed-42" in r.out and b"got-hello" in r.out, "replay through /v1: %r" % r.out)
    # no key: 401 before anything reaches the sandbox
    try:
        term(Via(s, prefix, {}), sid)
        raise AssertionError("attached without the API key")
    except HandshakeError as e:
        check(e.status == 401, "no key: %d" % e.status)
    r = s.request("DELETE", prefix + "/pty/" + sid, headers=ep["headers"], key=False)
    check(r.status == 200, "delete: %r" % r)
    print("ok   pty through the router: endpoint + headers, output, stdin, 409, takeover 4001, "
          "viewer, exit 5, replay under /v1, 401 without the key", flush=True)
    check(s.request("DELETE", "/v1/sandboxes/" + sb).status == 204, "delete sandbox")


if __name__ == "__main__":
    main(run)
