#!/usr/bin/env python3
"""kill -9 of the server, then a restart: Running and Paused sandboxes are re-adopted and still
answer through the router, a sandbox whose execd died is Failed (SANDBOX_LOST), creates and
deletes cut short by the kill end up Running or Failed (never Pending or Stopping), and no
process or directory is left that no sandbox owns. On both providers: 100 sandboxes, the
kill lands after a random number of a burst of 40 deletes + 60 creates was answered; on
`native` nothing leaks either (mounts, cgroups, processes, network namespaces, bridge leases
and veths, writable layers, runtime records), before and after deleting everything."""
import concurrent.futures
import os
import random
import time

from harness import check, main, session_pids, wait_for


def sandboxes(s):
    return {x["id"]: x for x in s.request("GET", "/v1/sandboxes?pageSize=200").json()["items"]}


def processes_in(base):
    """pid -> cwd of every process whose cwd is under base."""
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cwd = os.readlink("/proc/%s/cwd" % d)
            except OSError:
                continue
            if cwd.startswith(base + "/"):
                out[int(d)] = cwd
    return out


def readopt(new_server):
    s = new_server()
    s.start()
    a, b, c = [s.create().json()["id"] for _ in range(3)]
    check(s.request("POST", "/v1/sandboxes/%s/pause" % c).status == 202, "pause c")
    pid_b = int(open(os.path.join(s.state, "sandboxes", b, "execd.pid")).read().split()[0])
    for p in session_pids(pid_b):
        os.kill(p, 9)
    s.kill9()
    s.start()
    got = sandboxes(s)
    check(got[a]["status"]["state"] == "Running", "a re-adopted: %r" % got[a])
    check(got[c]["status"]["state"] == "Paused", "c re-adopted paused: %r" % got[c])
    check(got[b]["status"]["state"] == "Failed" and got[b]["status"]["reason"] == "SANDBOX_LOST",
          "b lost: %r" % got[b])
    out, _ = s.run(a, "echo alive")
    check(out == ["alive"], "a answers through the router after the restart")
    check(s.request("POST", "/v1/sandboxes/%s/resume" % c).status == 202, "resume c")
    check(s.run(c, "echo c")[0] == ["c"], "c answers after resume")
    for sid in (a, b, c):
        check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    check(s.stop() == 0, "clean stop")


def liveness_checks(s):
    for line in s.request("GET", "/metrics").body.decode().splitlines():
        if line.startswith("sbx_liveness_checks_total "):
            return int(line.split()[1])
    raise AssertionError("no sbx_liveness_checks_total in /metrics")


def pidfds(pid):
    """The fd numbers of pid's pidfds."""
    out = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == "anon_inode:[pidfd]":
                out.append(int(fd))
        except OSError:
            pass  # closed meanwhile
    return out


def polled(pid):
    """The fd numbers that pid's epoll instances watch (fdinfo's tfd lines)."""
    out = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) != "anon_inode:[eventpoll]":
                continue
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                out.update(int(line.split()[1]) for line in f if line.startswith("tfd:"))
        except OSError:
            pass  # closed meanwhile
    return out


def read_or_empty(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def child_of(pid, parent):
    stat = read_or_empty("/proc/%d/stat" % pid)
    return bool(stat) and int(stat.rsplit(")", 1)[1].split()[1]) == parent


def park_base(pid):
    """The server's parked range starts at a quarter of its open-files soft limit, at most
    65536."""
    for line in open("/proc/%d/limits" % pid):
        if line.startswith("Max open files"):
            soft = line.split()[3]
            quarter = 65536 if soft == "unlimited" else int(soft) // 4
            return min(quarter, 65536) if quarter >= 1024 else 0
    raise AssertionError("no open files limit")


def parked(s, execd):
    """A sandbox costs the server one descriptor: a pidfd of its init (native: the runtime's,
    which the reaper's watch polls as well; process: the watch's), in the reaper's epoll. It
    is parked above the base, so a new sandbox's init neither copies nor closes it (common/
    util.h); the sandbox's init holds nothing of the parked range."""
    base = park_base(s.proc.pid)
    check(base > 0, "the server's open-files limit leaves room to park: base %d" % base)
    # the reaper's liveness pass (every 5 s) puts the watch in place
    wait_for(lambda: pidfds(s.proc.pid) and set(pidfds(s.proc.pid)) <= polled(s.proc.pid),
             "the sandbox's pidfd in the reaper's epoll", timeout=15)
    fds = pidfds(s.proc.pid)
    check(len(fds) == 1, "one pidfd in the server for one sandbox: %r" % fds)
    check(all(fd >= base for fd in fds), "every pidfd of the server at or above %d: %r" % (base, fds))
    inside = [int(fd) for fd in os.listdir("/proc/%d/fd" % execd)]
    check(not pidfds(execd) and all(fd < base for fd in inside),
          "the sandbox's init holds nothing of the parked range: %r" % inside)


def lost_while_running(new_server):
    """execd dies while the server runs: the sandbox turns Failed/SANDBOX_LOST on its own."""
    s = new_server(tag="lost")
    s.start()
    sid = s.create().json()["id"]
    pid = int(open(os.path.join(s.state, "sandboxes", sid, "execd.pid")).read().split()[0])
    # a background command outside the sandbox dir must die with the sandbox too
    r = s.request("POST", "/sandboxes/%s/proxy/44772/command" % sid,
                  {"command": "cd / && sleep 300", "background": True})
    check(r.status == 200, "background command")
    wait_for(lambda: len(session_pids(pid)) >= 3, "the background command to start")
    parked(s, pid)
    # watched (a pidfd of execd), not asked every 5 s: no status call for it across two passes
    before = liveness_checks(s)
    time.sleep(11)
    check(liveness_checks(s) == before, "a watched sandbox is asked nothing while it runs")
    t0 = time.time()
    os.kill(pid, 9)
    st = wait_for(lambda: (lambda x: x if x["state"] == "Failed" else None)(
        s.request("GET", "/v1/sandboxes/" + sid).json()["status"]), "Failed", timeout=15)
    check(st["reason"] == "SANDBOX_LOST", "reason: %r" % st)
    print("lost sandbox noticed after %.1f s" % (time.time() - t0))
    check(liveness_checks(s) > before, "its watch fired and status was asked")
    wait_for(lambda: not session_pids(pid), "the rest of the session to be killed")
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete the lost one")
    check(s.stop() == 0, "clean stop")


def burst_and_kill(s):
    """100 sandboxes: 40 made first, then their 40 deletes and 60 more creates at once; the
    server is killed (-9) once a random number of those 100 requests has been answered, so
    creates and deletes are cut in every phase (queued, half-made, half-removed)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        doomed = [r.json()["id"] for r in pool.map(lambda _: s.create(), range(40))]
    check(len(doomed) == 40 and all(doomed), "40 sandboxes made")
    kill_after = random.randint(5, 70)
    with concurrent.futures.ThreadPoolExecutor(max_workers=64) as pool:
        futs = [pool.submit(s.request, "DELETE", "/v1/sandboxes/" + sid) for sid in doomed]
        futs += [pool.submit(s.create) for _ in range(60)]
        random.shuffle(futs)
        done = 0
        for f in concurrent.futures.as_completed(futs):
            done += 1
            if done == kill_after:
                s.kill9()
                print("kill -9 after %d of 100 requests were answered" % done)
        for f in futs:
            try:
                f.result()
            except OSError:
                pass
    s.start()
    got = sandboxes(s)
    hist = {}
    for x in got.values():
        k = "%s/%s" % (x["status"]["state"], x["status"].get("reason"))
        hist[k] = hist.get(k, 0) + 1
    print("after the restart: %s" % hist)
    states = {x["status"]["state"] for x in got.values()}
    check(not states & {"Pending", "Stopping", "Pausing", "Resuming"},
          "nothing left in a transient state: %r" % states)
    live = [sid for sid, x in got.items() if x["status"]["state"] == "Running"]
    for sid in live:
        check(s.run(sid, "echo ok")[0] == ["ok"], "%s answers" % sid)
    return got, live, set(doomed) | set(got)


def kill_mid_flight(new_server):
    s = new_server(tag="mid")
    s.start()
    base = os.path.join(s.state, "sandboxes")
    got, live, _ = burst_and_kill(s)
    procs = processes_in(base)
    owners = {cwd.split("/")[-2] for cwd in procs.values()}
    check(owners <= set(live), "processes only in live sandboxes: %r vs %r" % (owners, live))
    dirs = set(os.listdir(base))
    check(dirs <= set(live) | {x for x in got if got[x]["status"]["state"] != "Failed"},
          "no directory without a live sandbox: %r" % (dirs - set(live)))
    for sid in got:
        check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete %s" % sid)
    wait_for(lambda: not processes_in(base), "all sandbox processes to go")
    check(s.stop() == 0, "clean stop")


# ---- the same on the native provider, where a leak would be a mount, a cgroup, a network
# namespace (a process holding it, a bridge lease, a veth) or a writable layer on disk

def native_footprint(s, cg_parent, ids):
    """What exists on the host for this server's native sandboxes."""
    mounts = [l for l in open("/proc/self/mountinfo") if s.state in l]
    cgroups = []
    spares = []  # cgroups of deleted sandboxes kept by the server (runtime/cgspare.c)
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        if os.path.basename(root) == cg_parent:
            cgroups += [os.path.join(root, d) for d in dirs if not d.startswith(".spare-")]
            spares += [os.path.join(root, d) for d in dirs if d.startswith(".spare-")]
            dirs[:] = []
        elif root.count("/") > 8:
            dirs[:] = []
    procs = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if "/%s/" % cg_parent in open("/proc/%s/cgroup" % d).read():
                    procs.add(int(d))
            except OSError:
                pass
    netns = set()
    for p in procs:
        try:
            netns.add(os.readlink("/proc/%d/ns/net" % p))
        except OSError:
            pass
    leases = []
    ldir = "/run/sbx/net/sbx0/leases"
    for name in os.listdir(ldir) if os.path.isdir(ldir) else []:
        try:
            owner = os.readlink(os.path.join(ldir, name))
        except OSError:
            continue
        if owner in ids:
            leases.append((name, owner))
    veths = [n for n in os.listdir("/sys/class/net")
             if n in {"vsbx%08x" % int.from_bytes(bytes(int(x) for x in a.split(".")), "big")
                      for a, _ in leases}]
    layers = os.listdir(os.path.join(s.state, "upper")) if os.path.isdir(
        os.path.join(s.state, "upper")) else []
    records = [r for r in os.listdir(os.path.join(s.state, "run")) if not r.startswith(".")] \
        if os.path.isdir(os.path.join(s.state, "run")) else []
    return {"mounts": mounts, "cgroups": cgroups, "procs": procs, "netns": netns,
            "leases": leases, "veths": veths, "layers": layers, "records": records,
            "spares": spares}


SPARE_CGROUPS = 32  # SBX_NATIVE_SPARE_CGROUPS


def check_spares(fp, pid, where):
    """The kept cgroups are the running server's own (a killed one's were taken over or
    removed at the restart), at most SPARE_CGROUPS in each hierarchy, and empty: no process in
    any."""
    spares = fp["spares"]
    per_hierarchy = {}
    for p in spares:
        per_hierarchy[os.path.dirname(p)] = per_hierarchy.get(os.path.dirname(p), 0) + 1
    check(all(n <= SPARE_CGROUPS for n in per_hierarchy.values()),
          "%s: spare cgroups per hierarchy: %r" % (where, per_hierarchy))
    foreign = [p for p in spares if not os.path.basename(p).startswith(".spare-%d." % pid)]
    check(not foreign, "%s: spare cgroups not of the server %d: %r" % (where, pid, foreign))
    busy = [p for p in spares if read_or_empty(os.path.join(p, "cgroup.procs")).strip()]
    check(not busy, "%s: processes in spare cgroups: %r" % (where, busy))


def pool_leases(pid):
    """Bridge leases held by the namespace pool of the server process pid."""
    ldir = "/run/sbx/net/sbx0/leases"
    out = []
    for name in os.listdir(ldir) if os.path.isdir(ldir) else []:
        try:
            owner = os.readlink(os.path.join(ldir, name))
        except OSError:
            continue
        if owner.startswith("pool.%d." % pid):
            out.append(owner)
    return out


def native_mid_flight(new_server):
    cg = "sbx-crash-test-%d" % os.getpid()
    text = ('providers = { supported = ["native"]; default = "native";\n'
            '  native = { cgroup_parent = "%s"; }; };\n' % cg)
    s = new_server(config_text=text, tag="native-mid")
    try:
        s.start()
    except Exception as e:  # noqa: BLE001 - the reason is in the log
        if "unknown provider `native`" in s.log():
            print("native part skipped: this build has no native provider")
            return
        raise e
    probe = s.create()
    if probe.status != 202:
        print("native part skipped: the runtime cannot make sandboxes here: %r" % probe)
        return
    init = [int(d) for d in os.listdir("/proc") if d.isdigit() and child_of(int(d), s.proc.pid)
            and "/%s/%s" % (cg, probe.json()["id"]) in read_or_empty("/proc/%s/cgroup" % d)]
    check(len(init) == 1, "the native sandbox's init, a child of the server: %r" % init)
    parked(s, init[0])
    check(s.request("DELETE", "/v1/sandboxes/" + probe.json()["id"]).status == 204, "delete")
    killed = s.proc.pid
    # the server keeps network namespaces ready (netns_pool), each holding a bridge lease
    # under a placeholder id that names the server's pid
    wait_for(lambda: pool_leases(killed), "the namespace pool to fill")
    got, live, ids = burst_and_kill(s)
    # its pool's namespaces died with it; the restarted server's pool releases their leases
    # (its first create arms the pool)
    extra = s.create()
    check(extra.status == 202, "a create after the restart: %r" % extra)
    wait_for(lambda: not pool_leases(killed), "the killed server's pool leases to be released")
    check(s.request("DELETE", "/v1/sandboxes/" + extra.json()["id"]).status == 204, "delete")
    s.wait_native_gone(extra.json()["id"])
    # what the restart found half-made or half-deleted is torn down on a runtime thread after
    # the reconcile (as every native delete): wait for those teardowns (15 s each at most),
    # then nothing of them may be left
    for sid in set(ids) - set(live):
        s.wait_native_gone(sid)
    fp = native_footprint(s, cg, ids)
    per_sandbox = {k: len(v) for k, v in fp.items()}
    print("native footprint with %d live: %s" % (len(live), per_sandbox))
    check(sorted(fp["records"]) == sorted(live), "runtime records = live sandboxes: %r vs %r"
          % (fp["records"], live))
    check(sorted(fp["layers"]) == sorted(live), "disk layers = live sandboxes: %r"
          % sorted(set(fp["layers"]) ^ set(live)))
    check(sorted(o for _, o in fp["leases"]) == sorted(live), "bridge leases = live sandboxes")
    check(len(fp["netns"]) == len(live), "one netns per live sandbox: %d" % len(fp["netns"]))
    owners = set()
    for p in fp["procs"]:
        try:
            cgs = open("/proc/%d/cgroup" % p).read()
        except OSError:
            continue
        owners |= {sid for sid in ids if "/%s/%s" % (cg, sid) in cgs}
    check(owners <= set(live), "processes only in live sandboxes: %r" % (owners - set(live)))
    check({c.rsplit("/", 1)[1] for c in fp["cgroups"]} <= set(live),
          "cgroups only of live sandboxes")
    check_spares(fp, s.proc.pid, "after the restart")
    # allowed on the host: the records tmpfs (<state>/run) and the writable layers' file system
    # (<state>/upper, providers.native.total_disk); nothing of a sandbox
    extra = [m for m in fp["mounts"] if m.split()[4].rsplit("/", 1)[-1] not in ("run", "upper")]
    check(len(fp["mounts"]) <= 2 and not extra,
          "no host mount but the records tmpfs and the layers' file system: %r" % fp["mounts"])
    for sid in got:
        check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete %s" % sid)
    wait_for(lambda: not native_footprint(s, cg, ids)["procs"], "all sandbox processes to go")
    for sid in got:
        s.wait_native_gone(sid)  # the rest of each teardown follows the delete's answer
    fp = native_footprint(s, cg, ids)
    left = {k: v for k, v in fp.items() if v and k not in ("mounts", "spares")}
    check(not left, "nothing left after deleting everything: %r" % left)
    check_spares(fp, s.proc.pid, "after deleting everything")
    check(s.stop() == 0, "clean stop")
    check(not native_footprint(s, cg, ids)["spares"], "a clean stop removes the spare cgroups")
    s.gc_runtime()
    check(not [l for l in open("/proc/self/mountinfo") if s.state in l], "no mount left")
    fp = native_footprint(s, cg, ids)
    for path in fp["cgroups"] + fp["spares"]:
        os.rmdir(path)


def test(new_server):
    readopt(new_server)
    lost_while_running(new_server)
    kill_mid_flight(new_server)
    native_mid_flight(new_server)


if __name__ == "__main__":
    main(test)
