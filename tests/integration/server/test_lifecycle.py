#!/usr/bin/env python3
"""The lifecycle API end to end with the process provider and the real sbx-execd: create,
get, list (filters, pagination), endpoints, commands through the router, metadata patch, renew,
TTL expiry, pause/resume, delete; request ids; 50 concurrent creates while the API stays
responsive; clean SIGTERM (sanitizer leak check)."""
import concurrent.futures
import datetime
import os
import time

from harness import Fail, check, main, quote, session_pids, wait_for


def iso(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse(ts):
    return datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ")


def create_and_inspect(s):
    # The variables the server hands execd and its launcher cannot be set by a request (with
    # two copies of a name in the environment, which one wins depends on the reader).
    r = s.create(metadata={"project": "apollo", "team": "a"},
                 env={"GREETING": "hello", "SBX_EXECD_TOKEN": "caller-chosen",
                      "EXECD_ACCESS_TOKEN": "caller-chosen", "SBX_EXECD_LISTEN": "0.0.0.0:1"})
    check(r.status == 202, "create: %r" % r)
    sb = r.json()
    check(sb["status"]["state"] == "Running", "create answers Running: %r" % sb)
    for k in ("id", "createdAt", "entrypoint", "expiresAt"):
        check(k in sb, "create response has %s" % k)
    check("image" not in sb, "CreateSandboxResponse has no image")
    g = s.request("GET", "/v1/sandboxes/" + sb["id"])
    check(g.status == 200 and g.json()["image"] == {"uri": "host"}, "get: %r" % g)
    check(s.request("GET", "/sandboxes/" + sb["id"]).status == 200, "routes at / too")
    return sb["id"]


def check_router(s, sid):
    e = s.request("GET", "/v1/sandboxes/%s/endpoints/44772" % sid).json()
    check(e["endpoint"] == "127.0.0.1:%d/sandboxes/%s/proxy/44772" % (s.port, sid),
          "endpoint form: %r" % e)
    check(not e["endpoint"].startswith("http"), "endpoint is scheme-less")
    check(s.request("GET", "/v1/sandboxes/%s/endpoints/18080" % sid).status == 200,
          "any port resolves at once")
    ping = s.request("GET", "/sandboxes/%s/proxy/44772/ping" % sid, headers=e["headers"],
                     key=False)
    check(ping.status == 200, "ping through the router with the endpoint's headers: %r" % ping)
    out, _ = s.run(sid, "echo ${SBX_EXECD_TOKEN:-unset} ${EXECD_ACCESS_TOKEN:-unset}")
    check(out == ["unset unset"], "no execd variable reaches commands: %r" % out)
    m = s.request("GET", "/sandboxes/%s/proxy/44772/metrics" % sid, headers=e["headers"],
                  key=False)
    check(m.status == 200, "execd checks the server's token, not the request's: %r" % m)
    out, events = s.run(sid, "echo $GREETING; pwd; exit 3")
    check(out[0] == "hello", "sandbox env reaches commands: %r" % out)
    check(out[1].endswith("/sandboxes/%s/root" % sid), "cwd is the private dir: %r" % out)
    check(events[-1]["type"] == "error" and events[-1]["error"]["evalue"] == "3",
          "exit code through the router: %r" % events[-1])


def check_list(s, ids):
    r = s.request("GET", "/v1/sandboxes?pageSize=2&page=1").json()
    check(r["pagination"] == {"page": 1, "pageSize": 2, "totalItems": 3, "totalPages": 2,
                              "hasNextPage": True}, "pagination: %r" % r["pagination"])
    check([x["id"] for x in r["items"]] == [ids[2], ids[1]], "newest first")
    r = s.request("GET", "/v1/sandboxes?pageSize=2&page=2").json()
    check([x["id"] for x in r["items"]] == [ids[0]] and not r["pagination"]["hasNextPage"],
          "page 2")
    # the metadata filter is a query string inside one parameter (double-encoded on the wire)
    f = quote("project=apollo&note=" + quote("Demo_Test"))
    r = s.request("GET", "/v1/sandboxes?metadata=" + f).json()
    check([x["id"] for x in r["items"]] == [ids[1]], "metadata filter: %r" % r)
    r = s.request("GET", "/v1/sandboxes?state=running&state=Paused").json()
    check(r["pagination"]["totalItems"] == 3, "state filter is case-insensitive")
    r = s.request("GET", "/v1/sandboxes?state=Failed").json()
    check(r["pagination"]["totalItems"] == 0, "state filter excludes")
    check(s.request("GET", "/v1/sandboxes?metadata=" + quote("novalue")).status == 400,
          "malformed metadata filter is 400")


def check_patch_renew(s, sid, no_expiry_id):
    r = s.request("PATCH", "/v1/sandboxes/%s/metadata" % sid, {"team": None, "new": "x"})
    check(r.status == 200 and r.json()["metadata"] == {"project": "apollo", "new": "x"},
          "merge patch: %r" % r)
    want = datetime.datetime.utcnow() + datetime.timedelta(hours=2)
    r = s.request("POST", "/v1/sandboxes/%s/renew-expiration" % sid, {"expiresAt": iso(want)})
    check(r.status == 200, "renew: %r" % r)
    got = parse(s.request("GET", "/v1/sandboxes/" + sid).json()["expiresAt"])
    check(abs((got - want).total_seconds()) < 1, "GET reflects renew")
    past = iso(datetime.datetime.utcnow() - datetime.timedelta(seconds=5))
    r = s.request("POST", "/v1/sandboxes/%s/renew-expiration" % sid, {"expiresAt": past})
    check(r.status == 400, "renew into the past: %r" % r)
    r = s.request("POST", "/v1/sandboxes/%s/renew-expiration" % no_expiry_id,
                  {"expiresAt": iso(want)})
    check(r.status == 409 and r.json()["code"].endswith("INVALID_EXPIRATION"),
          "renew without expiry: %r" % r)


def check_pause(s, sid):
    check(s.request("POST", "/v1/sandboxes/%s/pause" % sid).status == 202, "pause")
    check(s.request("GET", "/v1/sandboxes/" + sid).json()["status"]["state"] == "Paused",
          "Paused")
    check(s.request("POST", "/v1/sandboxes/%s/pause" % sid).status == 409, "pause twice")
    r = s.request("GET", "/sandboxes/%s/proxy/44772/ping" % sid)
    check(r.status == 409, "router refuses a paused sandbox: %r" % r)
    check(s.request("POST", "/v1/sandboxes/%s/resume" % sid).status == 202, "resume")
    check(s.request("POST", "/v1/sandboxes/%s/resume" % sid).status == 409, "resume twice")
    out, _ = s.run(sid, "echo back")
    check(out == ["back"], "commands work after resume")


def check_expiry(s, sid):
    soon = iso(datetime.datetime.utcnow() + datetime.timedelta(seconds=2))
    r = s.request("POST", "/v1/sandboxes/%s/renew-expiration" % sid, {"expiresAt": soon})
    check(r.status == 200, "renew to 2 s")
    wait_for(lambda: s.request("GET", "/v1/sandboxes/" + sid).status == 404,
             "the reaper to remove an expired sandbox", timeout=10)


def check_delete(s, sid):
    pid = int(open(os.path.join(s.state, "sandboxes", sid, "execd.pid")).read().split()[0])
    r = s.request("DELETE", "/v1/sandboxes/" + sid)
    check(r.status == 204 and r.body == b"", "delete: %r" % r)
    check(s.request("GET", "/v1/sandboxes/" + sid).status == 404, "gone after delete")
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 404, "delete twice")
    wait_for(lambda: not session_pids(pid), "the sandbox's processes to die")
    check(not os.path.exists(os.path.join(s.state, "sandboxes", sid)), "dir removed")


def check_misc(s):
    r = s.request("GET", "/v1/sandboxes/nope", headers={"X-Request-ID": "  my-req-1 "})
    check(r.status == 404 and r.header("X-Request-ID") == "my-req-1", "request id echoed")
    check(len(s.request("GET", "/health", key=False).header("X-Request-ID")) == 32,
          "request id generated")
    check(s.request("POST", "/v1/metrics/events",
                    {"eventType": "sandbox.create", "createDurationMs": 5,
                     "success": True}).status == 204, "metrics events")
    r = s.request("GET", "/v1/sandboxes", key=False, headers={"Authorization": "Bearer " + s.key})
    check(r.status == 200, "bearer auth")


def check_concurrent(s):
    """50 creates at once; the API answers quickly all along."""
    slow = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=50) as pool:
        futs = [pool.submit(s.create, timeout=None, metadata={"batch": "b"}) for _ in range(50)]
        while not all(f.done() for f in futs):
            t = time.time()
            check(s.request("GET", "/v1/sandboxes?pageSize=1").status == 200, "list during load")
            slow.append(time.time() - t)
            time.sleep(0.05)
        results = [f.result() for f in futs]
    check(all(r.status == 202 and r.json()["status"]["state"] == "Running" for r in results),
          "all 50 Running: %r" % [r for r in results if r.status != 202][:3])
    check(max(slow) < 1.0, "API stayed responsive (worst %.3f s)" % max(slow))
    for r in results:
        check(s.request("DELETE", "/v1/sandboxes/" + r.json()["id"]).status == 204, "delete")


def test(new_server):
    s = new_server()
    s.start()
    a = create_and_inspect(s)
    b = s.create(metadata={"project": "apollo", "note": "Demo_Test"}).json()["id"]
    c = s.create(timeout=None).json()["id"]
    check("expiresAt" not in s.request("GET", "/v1/sandboxes/" + c).json(), "no expiry")
    check_router(s, a)
    check_list(s, [a, b, c])
    check_patch_renew(s, a, c)
    check_pause(s, a)
    check_expiry(s, b)
    check_delete(s, a)
    check_delete(s, c)
    check_misc(s)
    check_concurrent(s)
    rc = s.stop()
    if rc != 0:
        raise Fail("server exit status %d on SIGTERM: %s" % (rc, s.log()))


if __name__ == "__main__":
    main(test)
