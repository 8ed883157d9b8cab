#!/usr/bin/env python3
"""Pools of warm sandboxes on the docker provider, against a real engine (a private dockerd or
podman service started and stopped by PID by engine.py; the image from a local
docker-registry): the refill makes warm containers with execd up (a take runs a command at
once, with the template's env), a take is a container that was already running, concurrent
takes get distinct containers, kill -9 of the server with warm containers and a refill in
flight (after the restart the pool is re-adopted with its counts, every container of the
server is one the server knows: none leaked, none added), DELETE of the pool removes the warm
containers and keeps the taken ones, and at the end no container of the server is left.

  test_pools.py SBX ENGINE        ENGINE: dockerd or podman (the other is the fallback)
Skips (77) only when neither engine can start."""
import concurrent.futures
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
sys.path.insert(0, HERE)

import engine as eng  # noqa: E402
from harness import check, main, wait_for  # noqa: E402

TIMEOUT = 120  # a docker refill is a container create + start + execd's /ping


def config(e):
    return ('providers = { supported = ["docker"]; default = "docker";\n'
            '  docker = { socket = "%s"; network = "none"; cgroup_parent = "%s";\n'
            '             stop_timeout_s = 5; }; };\n'
            'limits = { max_sandboxes = 20; };\n' % (e.socket, e.cgroup_parent))


def template(image):
    return {"image": {"uri": image}, "entrypoint": ["sleep", "3600"],
            "env": {"POOLED": "docker"}, "metadata": {"team": "pool"},
            "resourceLimits": {"cpu": "500m", "memory": "128Mi"}}


def cap(bmax, bmin, pmax, pmin=0):
    return {"bufferMax": bmax, "bufferMin": bmin, "poolMax": pmax, "poolMin": pmin}


def pool(s, name):
    r = s.request("GET", "/v1/pools/" + name)
    check(r.status == 200, "get pool %s: %r" % (name, r))
    return r.json()


def settled(s, name, available, allocated):
    """The pool holds `available` warm and `allocated` taken sandboxes and makes none."""
    p = pool(s, name)
    st = p["status"]
    return p if (st["available"] == available and st["allocated"] == allocated and
                 st["total"] == available + allocated) else None


def wait_settled(s, name, available, allocated):
    return wait_for(lambda: settled(s, name, available, allocated),
                    "pool %s: %d warm, %d taken" % (name, available, allocated), TIMEOUT)


def containers(e, s):
    """{sandbox id: running?} of every container this server made (its state-dir label)."""
    return {c["Labels"]["io.sbx.sandbox-id"]: c["State"] == "running"
            for c in e.containers("io.sbx.state-dir=" + s.state)}


def listed(s):
    return {x["id"] for x in s.request("GET", "/v1/sandboxes?pageSize=200").json()["items"]}


def take(s, name, **kw):
    body = {"extensions": {"poolRef": name}, "timeout": 600}
    body.update(kw)
    return s.request("POST", "/v1/sandboxes", body, timeout=TIMEOUT)


def inside(s, sid, cmd):
    out, events = s.run(sid, cmd)
    check(events[-1]["type"] == "execution_complete", "%r in %s: %r" % (cmd, sid, events[-3:]))
    return out


def warm_pool(s, e, image):
    r = s.request("POST", "/v1/pools", {"name": "d", "template": template(image),
                                        "capacitySpec": cap(2, 2, 10)})
    check(r.status == 201 and r.json()["provider"] == "docker", "docker pool: %r" % r)
    wait_settled(s, "d", 2, 0)
    warm = containers(e, s)
    check(len(warm) == 2 and all(warm.values()), "two running warm containers: %r" % warm)
    check(not listed(s), "warm sandboxes are not listed")
    return set(warm)


def first_take(s, e, warm):
    t0 = time.monotonic()
    r = take(s, "d", metadata={"job": "j1"})
    took = time.monotonic() - t0
    check(r.status == 202 and r.json()["status"]["state"] == "Running", "take: %r" % r)
    sb = r.json()
    check(sb["id"] in warm, "a take hands out a warm container: %s not in %r" % (sb["id"], warm))
    check(sb["provider"] == "docker" and sb["metadata"] == {"team": "pool", "job": "j1"},
          "the request's metadata over the template's: %r" % sb)
    check(took < 2, "a take answers at once (%.3f s)" % took)
    # execd is already up in a warm container: the first command needs no /ping first
    out = inside(s, sb["id"], "echo $POOLED; tr '\\0' ' ' < /proc/1/cmdline")
    check(out[0] == "docker", "the template's env: %r" % out)
    check(out[1].startswith("/.sbx/bin/sbx-execd "), "execd is the container's PID 1: %r" % out)
    check(listed(s) == {sb["id"]}, "the taken one is listed")
    wait_settled(s, "d", 2, 1)
    return sb["id"]


def concurrent_takes(s):
    with concurrent.futures.ThreadPoolExecutor(3) as ex:
        rs = list(ex.map(lambda _: take(s, "d"), range(3)))
    check(all(r.status == 202 for r in rs), "concurrent takes: %r" % rs)
    ids = [r.json()["id"] for r in rs]
    check(len(set(ids)) == 3, "distinct containers: %r" % ids)
    for sid in ids:
        check(inside(s, sid, "echo ok") == ["ok"], "each runs commands")
    return ids


def restart(s, e, taken):
    """kill -9 with warm containers and (most likely) a refill in flight."""
    wait_settled(s, "d", 2, len(taken))
    for _ in range(2):  # the pool empties: its refill starts at once
        r = take(s, "d")
        check(r.status == 202, "take before the kill: %r" % r)
        taken.append(r.json()["id"])
    # kill -9 while the refill's container is being made (created, starting, or execd not up)
    wait_for(lambda: len(containers(e, s)) > len(taken), "the refill to make a container",
             TIMEOUT)
    s.kill9()
    before = containers(e, s)
    check(set(taken) <= set(before), "taken containers outlive the server")
    print("at the kill: %d containers, %d taken, %d not running" % (
        len(before), len(taken), sum(1 for v in before.values() if not v)))
    s.start()
    p = wait_settled(s, "d", 2, len(taken))
    check(p["capacitySpec"] == cap(2, 2, 10), "capacity kept: %r" % p)
    time.sleep(1.5)  # a refiller pass: nothing more is made
    after = containers(e, s)
    known = set(taken) | {sid for sid in after
                          if s.request("GET", "/v1/sandboxes/" + sid).status == 200}
    check(set(after) == known, "every container is one the server knows: %r vs %r"
          % (sorted(after), sorted(known)))
    check(len(after) == len(taken) + 2 and all(after.values()),
          "the taken ones and two warm ones, all running, none leaked: %r" % after)
    check(listed(s) == set(taken), "only the taken ones are listed after the restart")
    for sid in taken:
        check(inside(s, sid, "echo alive") == ["alive"], "a taken one answers after the restart")
    warm = set(after) - set(taken)
    r = take(s, "d")
    check(r.status == 202 and r.json()["id"] in warm, "a re-adopted warm one is taken: %r" % r)
    check(inside(s, r.json()["id"], "echo $POOLED") == ["docker"], "and runs commands at once")
    taken.append(r.json()["id"])
    wait_settled(s, "d", 2, len(taken))


def delete_pool(s, e, taken):
    check(s.request("DELETE", "/v1/pools/d").status == 204, "delete the pool")
    wait_for(lambda: set(containers(e, s)) == set(taken), "the warm containers to go", TIMEOUT)
    for sid in taken:
        g = s.request("GET", "/v1/sandboxes/" + sid)
        check(g.status == 200 and g.json()["status"]["state"] == "Running",
              "taken sandboxes stay their owner's: %r" % g)
    for sid in taken:
        check(s.request("DELETE", "/v1/sandboxes/" + sid, timeout=TIMEOUT).status == 204,
              "delete a taken one")
    check(not containers(e, s), "no container of the server left: %r" % containers(e, s))


def run(new_server, setup):
    e = setup.engine
    s = new_server(config_text=config(e), tag="docker-pools")
    s.start()
    warm = warm_pool(s, e, setup.image)
    taken = [first_take(s, e, warm)]
    taken += concurrent_takes(s)
    restart(s, e, taken)
    delete_pool(s, e, taken)
    check(s.stop() == 0, "clean stop (sanitizers)")
    print("ok docker pools on %s" % e.kind)


def test(new_server):
    setup = eng.Setup(sys.argv[2])
    setup.run_test(lambda _: run(new_server, setup))


if __name__ == "__main__":
    main(test)
