#!/usr/bin/env python3
"""The `native` provider (the runtime: namespaces, overlay root, cgroups) behind the API:
create with limits, commands through the router into an isolated sandbox (own pid namespace,
hostname, loopback-only network, private writable root), the memory limit (an OOM inside), pause/resume (freezer),
kill -9 of the server and re-adoption, delete with nothing left. Skips when this build has no
runtime or the host cannot make sandboxes."""
import concurrent.futures
import os
import random
import time

from harness import Skip, check, main

CONFIG = 'providers = { supported = ["native", "process"]; default = "native"; };\n'


def inside(s, sid, cmd):
    out, events = s.run(sid, cmd)
    check(events[-1]["type"] == "execution_complete", "%r succeeded: %r" % (cmd, events))
    return out


def isolation(s, sid):
    out = inside(s, sid, "echo $$; hostname; cat /proc/1/cmdline | tr '\\0' ' '")
    check(int(out[0]) < 100, "own pid namespace (pid %s)" % out[0])
    check(out[1] == sid, "hostname is the id: %r" % out[1])
    check("/.sbx/bin/sbx-execd" in out[2], "execd is PID 1: %r" % out[2])
    out = inside(s, sid, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '")
    check(sorted(out) == ["eth0", "lo"], "own netns with the bridge's eth0: %r" % out)
    out = inside(s, sid, "ip -4 -o addr show eth0 | awk '{print $4}'; ip route show default")
    check(out[0].startswith("10.88.") and "via 10.88.0.1" in out[1], "bridge address: %r" % out)
    marker = "/tmp/sbx-native-test-%d" % os.getpid()
    inside(s, sid, "echo x > %s && cat %s" % (marker, marker))
    check(not os.path.exists(marker), "writes stay inside the sandbox")


def memory_limit(s):
    """resourceLimits.memory is the cgroup limit: a memory bomb dies, the sandbox lives on."""
    r = s.create(resourceLimits={"cpu": "1", "memory": "64Mi"})
    check(r.status == 202, "create with 64Mi: %r" % r)
    sid = r.json()["id"]
    # tail keeps the last "line" of /dev/zero (which has no newline) in memory
    _, events = s.run(sid, "tail /dev/zero", timeout=120)
    check(events[-1]["type"] == "error", "memory bomb killed: %r" % events[-3:])
    check(inside(s, sid, "echo alive") == ["alive"], "the sandbox survives its OOM")
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")


def kill_mid_create(s):
    """kill -9 during a burst of native creates: afterwards every sandbox is Running (and
    answers) or Failed, and the runtime keeps records only for the Running ones."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        futs = [pool.submit(s.create) for _ in range(16)]
        time.sleep(random.uniform(0.02, 0.15))
        s.kill9()
        for f in futs:
            try:
                f.result()
            except OSError:
                pass
    s.start()
    items = s.request("GET", "/v1/sandboxes?pageSize=200").json()["items"]
    states = {x["status"]["state"] for x in items}
    check(states <= {"Running", "Failed"}, "nothing transient: %r" % states)
    live = {x["id"] for x in items if x["status"]["state"] == "Running"}
    for sid in live:
        check(inside(s, sid, "echo up") == ["up"], "%s answers" % sid)
    # Half-made creates are torn down on a runtime thread after the restart: wait for it.
    def stale():
        records = set(os.listdir(os.path.join(s.state, "run"))) - {"images"}
        return {r for r in records if not r.startswith(".")} - live
    deadline = time.monotonic() + 10
    while stale() and time.monotonic() < deadline:
        time.sleep(0.02)
    check(not stale(), "runtime records only for live sandboxes: %r" % stale())
    for x in items:
        check(s.request("DELETE", "/v1/sandboxes/" + x["id"]).status == 204, "delete")


def test(new_server):
    s = new_server(config_text=CONFIG, tag="native")
    s.start_native()
    try:
        r = s.create(resourceLimits={"cpu": "500m", "memory": "512Mi"})
        if r.status != 202:
            raise Skip("the runtime cannot make sandboxes on this host: %r" % r)
        sid = r.json()["id"]
        check(r.json()["provider"] == "native", "default provider is native")
        isolation(s, sid)
        memory_limit(s)
        check(s.request("POST", "/v1/sandboxes/%s/pause" % sid).status == 202, "pause")
        check(s.request("GET", "/sandboxes/%s/proxy/44772/ping" % sid).status == 409,
              "paused sandbox refuses the router")
        check(s.request("POST", "/v1/sandboxes/%s/resume" % sid).status == 202, "resume")
        check(inside(s, sid, "echo back") == ["back"], "commands after resume")
        r = s.create(image={"uri": "python:3.11"})
        check(r.status == 400 and "not found" in r.json()["message"],
              "an image not in the store is a clear 400, never a silent host image: %r" % r)
        p = s.create(provider="process")
        check(p.status == 202 and p.json()["provider"] == "process", "named provider: %r" % p)
        s.kill9()
        s.start()
        got = s.request("GET", "/v1/sandboxes/" + sid).json()
        check(got["status"]["state"] == "Running", "re-adopted after kill -9: %r" % got)
        check(inside(s, sid, "echo again") == ["again"], "answers after the restart")
        for x in (sid, p.json()["id"]):
            check(s.request("DELETE", "/v1/sandboxes/" + x).status == 204, "delete")
        # Delete answers once the sandbox is killed; the teardown (cgroups, mounts, record)
        # finishes on a runtime thread right after, off the request's critical path.
        record = os.path.join(s.state, "run", sid)
        deadline = time.monotonic() + 10
        while os.path.exists(record) and time.monotonic() < deadline:
            time.sleep(0.02)
        check(not os.path.exists(record), "runtime record removed after the async teardown")
        kill_mid_create(s)
        check(s.stop() == 0, "clean stop")
    finally:
        s.kill9()
        s.gc_runtime()


if __name__ == "__main__":
    main(test)
