#!/usr/bin/env python3
"""kill -9 of the server, then a restart: Running and Paused sandboxes are re-adopted and still
answer through the router, a sandbox whose execd died is Failed (SANDBOX_LOST), creates and
deletes cut short by the kill end up Running or Failed (never Pending or Stopping), and no
process or directory is left that no sandbox owns."""
import concurrent.futures
import os
import random
import time

from harness import Fail, check, main, session_pids, wait_for


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
    os.kill(pid, 9)
    st = wait_for(lambda: (lambda x: x if x["state"] == "Failed" else None)(
        s.request("GET", "/v1/sandboxes/" + sid).json()["status"]), "Failed", timeout=15)
    check(st["reason"] == "SANDBOX_LOST", "reason: %r" % st)
    wait_for(lambda: not session_pids(pid), "the rest of the session to be killed")
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete the lost one")
    check(s.stop() == 0, "clean stop")


def kill_mid_flight(new_server):
    s = new_server(tag="mid")
    s.start()
    base = os.path.join(s.state, "sandboxes")
    # 100 sandboxes in all: 40 made first, then 40 deletes and 60 creates cut by the kill
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        doomed = [r.json()["id"] for r in pool.map(lambda _: s.create(), range(40))]
    check(len(doomed) == 40, "40 sandboxes made")
    with concurrent.futures.ThreadPoolExecutor(max_workers=64) as pool:
        futs = [pool.submit(s.request, "DELETE", "/v1/sandboxes/" + sid) for sid in doomed]
        futs += [pool.submit(s.create) for _ in range(60)]
        delay = random.uniform(0.05, 0.5)  # somewhere inside the burst
        print("kill -9 after %.3f s" % delay)
        time.sleep(delay)
        s.kill9()
        for f in futs:
            try:
                f.result()
            except OSError:
                pass
    s.start()
    got = sandboxes(s)
    states = {x["status"]["state"] for x in got.values()}
    hist = {}
    for x in got.values():
        k = "%s/%s" % (x["status"]["state"], x["status"].get("reason"))
        hist[k] = hist.get(k, 0) + 1
    print("after the kill: %s" % hist)
    check(not states & {"Pending", "Stopping", "Pausing", "Resuming"},
          "nothing left in a transient state: %r" % states)
    live = [sid for sid, x in got.items() if x["status"]["state"] == "Running"]
    for sid in live:
        check(s.run(sid, "echo ok")[0] == ["ok"], "%s answers" % sid)
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


def test(new_server):
    readopt(new_server)
    lost_while_running(new_server)
    kill_mid_flight(new_server)


if __name__ == "__main__":
    main(test)
