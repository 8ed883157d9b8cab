#!/usr/bin/env python3
"""The liveness check on the docker provider (its `watch` op: a pidfd of each container's init,
kept by the server's reaper), against a real engine (a private dockerd or podman service,
started and stopped by PID; the image from a local docker-registry), through the server API.
`sbx_liveness_checks_total` in /metrics counts the reaper's status calls:

- three idle watched containers cost no status call across two passes of the check (polling
  asked each of them every 5 s);
- pause (the engine's freezer) does not fire the watch: a pass while paused and the resume
  cost nothing, and the sandbox is never marked lost;
- stop fires it (no status call: the sandbox is not live then) and start makes a new init,
  watched again at the next pass without a status call;
- kill -9 of a container's init from the host: its watch fires, one status call, the sandbox is
  Failed (the container's reason, `CONTAINER_EXITED_ERROR`) within a couple of seconds and its
  container removed; the others are untouched.

  test_liveness_docker.py SBX ENGINE      ENGINE: dockerd or podman (the other the fallback)
Skips (77) only when neither engine can start."""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
sys.path.insert(0, HERE)

import engine as eng  # noqa: E402
from harness import Fail, check, main, wait_for  # noqa: E402
from test_docker import config, container, create, inside  # noqa: E402

PASS_S = 5  # the reaper's liveness pass (LIVENESS_EVERY ticks of 1 s)


def checks(s):
    for line in s.request("GET", "/metrics").body.decode().splitlines():
        if line.startswith("sbx_liveness_checks_total "):
            return int(line.split()[1])
    raise Fail("no sbx_liveness_checks_total in /metrics")


def state(s, sid):
    return s.request("GET", "/v1/sandboxes/" + sid).json()["status"]


def act(s, sid, verb, want):
    r = s.request("POST", "/v1/sandboxes/%s/%s" % (sid, verb), timeout=120)
    check(r.status in (200, 202, 204), "%s: %r" % (verb, r))
    wait_for(lambda: state(s, sid)["state"] == want, "%s -> %s" % (verb, want), timeout=60)


def run(new_server, e, image):
    s = new_server(config_text=config(e), tag="live")
    s.start()
    sids = []
    for _ in range(3):
        r = create(s, image)
        check(r.status == 202 and r.json()["status"]["state"] == "Running", "create: %r" % r)
        sids.append(r.json()["id"])
    sid = sids[0]

    # (a) idle: watched, never asked (polling would have asked 3 sandboxes twice)
    before = checks(s)
    time.sleep(2 * PASS_S + 1)
    idle = checks(s) - before
    check(idle == 0, "idle watched containers cost no status call: %d calls" % idle)
    print("ok 3 idle containers, two passes: %d status calls" % idle)

    # (c) pause/resume: the freezer stops the init without ending it
    act(s, sid, "pause", "Paused")
    time.sleep(PASS_S + 1)
    check(state(s, sid)["state"] == "Paused", "still Paused after a pass: %r" % state(s, sid))
    act(s, sid, "resume", "Running")
    check(inside(s, sid, "echo back") == ["back"], "commands after resume")
    check(checks(s) == before, "pause and resume fired no watch: %d calls" % (checks(s) - before))
    print("ok pause/resume: not lost, no status call")

    # stop fires the watch of a sandbox that is no longer live (nothing asked); start makes a
    # new init, watched at the next pass
    act(s, sid, "stop", "Stopped")
    act(s, sid, "start", "Running")
    time.sleep(PASS_S + 1)
    check(checks(s) == before, "stop/start cost no status call: %d" % (checks(s) - before))
    print("ok stop/start: watched again, no status call")

    # (b) kill -9 of the (new) init from the host: noticed through the watch
    pid = container(e, sid)["State"]["Pid"]
    check(pid > 1, "the container's init is a host process: %r" % pid)
    t0 = time.time()
    os.kill(pid, 9)
    st = wait_for(lambda: (lambda x: x if x["state"] == "Failed" else None)(state(s, sid)),
                  "Failed", timeout=15)
    took = time.time() - t0
    print("ok kill -9 of the init noticed after %.2f s: %s/%s" % (took, st["state"],
                                                                   st["reason"]))
    check(st["reason"] == "CONTAINER_EXITED_ERROR", "the container's reason: %r" % st)
    check(took < 3, "noticed within a couple of seconds (the watch, not a 5 s pass): %.2f s"
          % took)
    check(checks(s) - before == 1, "one status call, for the fired watch: %d"
          % (checks(s) - before))
    wait_for(lambda: container(e, sid) is None, "the dead container removed")
    for other in sids[1:]:
        check(state(s, other)["state"] == "Running", "the others run on")
        check(inside(s, other, "echo ok") == ["ok"], "the others answer")
    for x in sids:
        check(s.request("DELETE", "/v1/sandboxes/" + x).status == 204, "delete")
    check(s.stop() == 0, "clean stop")


def test(new_server):
    setup = eng.Setup(sys.argv[2] if len(sys.argv) > 2 else "dockerd")

    def body(_):
        print("engine: %s" % setup.engine.kind)
        run(new_server, setup.engine, setup.image)

    setup.run_test(body)


if __name__ == "__main__":
    main(test)
