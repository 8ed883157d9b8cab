"""Published ports (extensions["sbx.publish"]): a sandbox port on a host port, for clients that
take an address and a port (OSWorld's PythonController). An HTTP server inside a native
sandbox, listening on the sandbox's own loopback only, answers on the host port; the record
keeps the host port, the endpoints API reports it, a kill -9 and restart serves it again on
the same port, a delete closes it. Bad specs and a taken host port are refused by name.

  argv[1] = the sbx binary (sbx-execd next to it)
"""
import http.client
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Skip, check, free_port, main, wait_for  # noqa: E402

CONFIG = 'providers = { supported = ["native"]; default = "native"; };\n'


def get(port, path="/hello.txt", timeout=5):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def refused(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except OSError:
        return True


def bad_specs(s):
    for spec, why in (("0", "1-65535"), ("70000", "1-65535"), ("80,80", "twice"),
                      ("80:x", "PORT:HOSTPORT"), ("a", "PORT"), ("", "PORT"), ("80,", "`,`"),
                      (",".join(str(1000 + i) for i in range(9)), "at most 8")):
        r = s.create(extensions={"sbx.publish": spec})
        check(r.status == 400 and "sbx.publish" in r.json()["message"] and
              why in r.json()["message"], "spec %r refused naming it: %r" % (spec, r))
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    r = s.create(extensions={"sbx.publish": "8000:%d" % port})
    check(r.status == 409 and r.json()["code"] == "SANDBOX::PORT_IN_USE" and
          str(port) in r.json()["message"], "a taken host port: %r" % r)
    taken.close()
    print("ok   bad specs and a taken host port are refused by name", flush=True)


def test(new_server):
    if os.geteuid() != 0:
        raise Skip("native sandboxes need root")
    s = new_server(config_text=CONFIG, tag="pub")
    s.start()
    bad_specs(s)
    fixed = free_port()
    r = s.create(extensions={"sbx.publish": "8000,8001:%d" % fixed})
    check(r.status == 202, "create: %r" % r)
    sid = r.json()["id"]
    spec = s.request("GET", "/v1/sandboxes/" + sid).json()["extensions"]["sbx.publish"]
    parts = dict(p.split(":") for p in spec.split(","))
    check(set(parts) == {"8000", "8001"} and parts["8001"] == str(fixed) and
          int(parts["8000"]) > 0, "the record holds the host ports: %r" % spec)
    host = int(parts["8000"])
    ep = s.request("GET", "/v1/sandboxes/%s/endpoints/8000" % sid).json()
    check(ep["published"] == "127.0.0.1:%d" % host and "/proxy/8000" in ep["endpoint"],
          "the endpoints API reports it: %r" % ep)
    check("published" not in s.request("GET", "/v1/sandboxes/%s/endpoints/9" % sid).json(),
          "an unpublished port has no `published`")
    # nothing listens yet: the connection is accepted and closed, the server stays up
    try:
        st, _ = get(host)
        check(st >= 500, "nothing behind it yet: %r" % st)
    except (http.client.HTTPException, OSError):
        pass
    # a server on the sandbox's own loopback only
    s.run(sid, "cd /tmp && echo published > hello.txt && (setsid python3 -m http.server 8000 "
               "--bind 127.0.0.1 > /tmp/http.log 2>&1 &) ; sleep 0.1")
    def serving():
        # until python's server listens, the publisher's connection into the sandbox is
        # refused and it resets ours (python starts slower than `sleep 0.1` on a loaded host)
        try:
            return not refused(host) and get(host)[0] == 200
        except (http.client.HTTPException, OSError):
            return False
    wait_for(serving, "the sandbox's server on the published port", 20)
    check(get(host) == (200, b"published\n"), "the content through the host port")
    # many at once, and a big answer
    s.run(sid, "head -c 5000000 /dev/urandom > /tmp/big.bin")
    st, body = get(host, "/big.bin", timeout=30)
    check(st == 200 and len(body) == 5000000, "5 MB through: %d bytes" % len(body))
    print("ok   a loopback-only server in the sandbox answers on host port %d" % host,
          flush=True)
    # the server dies (kill -9) and comes back: the same host port serves again
    s.kill9()
    check(refused(host), "no listener while the server is down")
    s.start()
    wait_for(lambda: not refused(host) and get(host)[0] == 200,
             "the published port after the restart", 20)
    print("ok   kill -9 + restart: served again on the same host port", flush=True)
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    wait_for(lambda: refused(host) and refused(fixed), "the listeners to close", 10)
    check(s.stop() == 0, "clean stop")
    print("ok   deleted: the host ports are closed", flush=True)


if __name__ == "__main__":
    main(test)
