#!/usr/bin/env python3
"""Scale limits (issue 16, "Scale"): what stops sandboxes from being created answers with a
{code, message} that names the limit and where to raise it, never an obscure 500.

  limits.py SBX
- limits.max_sandboxes: the create past it is a 429 SANDBOX::LIMIT_EXCEEDED naming the key;
- the address pool (providers.native.subnet): a /29 bridge network holds 5 sandboxes; the 6th
  is a 429 naming the subnet key; after a delete there is room again;
- RLIMIT_NOFILE: the server raises its soft limit to the hard one at start (checked in
  /proc/PID/limits), and its sandboxes get the limit it was started with, not the raised one.
(The bridge's port limit, BR_MAX_PORTS = 1024, no longer binds: sandboxes go onto leaf
bridges. The limit of 1023 leaves answers the same way, from the same place as the pool's, but
needs a thousand leaves: unit/net/ipam checks its message.) Exit 77 when no native sandbox
can be made here."""
import os
import resource
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration", "server"))

from harness import Fail, Server, Skip, check, remove_bridge  # noqa: E402


def limit_of(pid, name):
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith(name):
                return line[len(name):].split()[0]
    return None


def main():
    sbx = sys.argv[1]
    tag = os.getpid() % 200 + 20
    bridge = "sbxlim%d" % tag
    subnet = "10.233.%d.0/29" % tag
    conf = ('providers = { supported = ["native"]; default = "native";\n'
            '  native = { bridge = "%s"; subnet = "%s"; netns_pool = 0; }; };\n'
            'limits = { max_sandboxes = 7; };\n' % (bridge, subnet))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(1024, hard)
    # started with a low soft limit, as from a login shell
    s = Server(sbx, config_text=conf, tag="limits",
               env=dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "")))
    resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
    try:
        s.start()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    ids = []
    try:
        probe = s.create(entrypoint=["sleep", "600"])
        if probe.status != 202:
            raise Skip("no native sandbox can be made here: %r" % probe)
        ids.append(probe.json()["id"])
        raised = limit_of(s.proc.pid, "Max open files")
        check(raised is not None and (raised == "unlimited" or int(raised) >= hard),
              "the server raised its open files limit (%s, hard %d)" % (raised, hard))
        out, _ = s.run(ids[0], "ulimit -n")
        check(out == [str(low)], "a sandbox gets the limit the server was started with: %r" % out)
        # the pool of a /29: 8 addresses - network, gateway, broadcast = 5
        for i in range(4):
            r = s.create(entrypoint=["sleep", "600"])
            check(r.status == 202, "create %d of 5: %r" % (i + 2, r))
            ids.append(r.json()["id"])
        r = s.create(entrypoint=["sleep", "600"])
        check(r.status == 429, "the 6th create on a /29 is a 429: %r" % r)
        body = r.json()
        check(body.get("code") == "SANDBOX::LIMIT_EXCEEDED", "its code: %r" % body)
        check("exhausted" in body["message"] and "providers.native.subnet" in body["message"],
              "its message names the pool and the key: %r" % body["message"])
        # after a delete there is room again (the address comes back with the teardown)
        check(s.request("DELETE", "/v1/sandboxes/" + ids.pop()).status == 204, "delete")
        for _ in range(100):
            r = s.create(entrypoint=["sleep", "600"])
            if r.status == 202:
                break
            import time
            time.sleep(0.1)
        check(r.status == 202, "a create after the delete: %r" % r)
        ids.append(r.json()["id"])
        # max_sandboxes (7): 5 live + 2 that failed (Failed does not count) -> make the
        # limit bite with network none
        s2conf = ('providers = { supported = ["native"]; default = "native";\n'
                  '  native = { network = "none"; netns_pool = 0; }; };\n'
                  'limits = { max_sandboxes = 2; };\n')
        s2 = Server(sbx, config_text=s2conf, tag="limits-max")
        s2.start()
        try:
            a = s2.create(entrypoint=["sleep", "600"])
            b = s2.create(entrypoint=["sleep", "600"])
            check(a.status == 202 and b.status == 202, "two creates: %r %r" % (a, b))
            c = s2.create(entrypoint=["sleep", "600"])
            check(c.status == 429 and c.json().get("code") == "SANDBOX::LIMIT_EXCEEDED",
                  "the third is a 429: %r" % c)
            check("limits.max_sandboxes" in c.json()["message"],
                  "its message names the key: %r" % c.json()["message"])
            for x in (a, b):
                check(s2.request("DELETE", "/v1/sandboxes/" + x.json()["id"]).status == 204,
                      "delete")
            check(s2.stop() == 0, "clean stop")
        finally:
            s2.cleanup()
        for sid in ids:
            check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
        ids = []
        check(s.stop() == 0, "clean stop")
    finally:
        s.cleanup()
        remove_bridge(s.sbx, bridge, subnet)


if __name__ == "__main__":
    try:
        main()
    except Skip as e:
        print("SKIP: %s" % e)
        sys.exit(77)
    except Fail as e:
        print("FAIL: %s" % e)
        sys.exit(1)
    print("ok")
