#!/usr/bin/env python3
"""The diagnostics API (diagnostic-api.yml) on real sandboxes: container logs (execd's lines
and what the entrypoint printed, hostile bytes made valid UTF-8, a flood kept to the ring with
`truncated`), lifecycle events across pause/resume and a server restart, the provider's
runtime view, `all`, and the refusals (scope missing or unknown, unknown sandbox, the key).
"""

from harness import check, main, wait_for

# the entrypoint prints a marker, invalid UTF-8, control characters and a "JSON" line
NOISY = ("printf 'diag-marker-1\\n\\377\\376 bad bytes \\033[31m red \\001\\n"
         "{\"code\":\"fake\"}\\n'; exec sleep 3600")


def diag(s, sid, kind, scope, key=True):
    q = "" if scope is None else "?scope=" + scope
    return s.request("GET", "/v1/sandboxes/%s/diagnostics/%s%s" % (sid, kind, q), key=key)


def descriptor(s, sid, kind, scope):
    r = diag(s, sid, kind, scope)
    check(r.status == 200, "%s/%s: 200: %r" % (kind, scope, r))
    j = r.json()
    check(j["sandboxId"] == sid and j["kind"] == kind and j["scope"] == scope and
          j["delivery"] == "inline" and j["contentType"] == "text/plain; charset=utf-8" and
          isinstance(j["content"], str) and isinstance(j["truncated"], bool) and
          "contentUrl" not in j, "%s/%s: the descriptor: %r" % (kind, scope, j))
    return j


def test(new_server):
    s = new_server(tag="diag")
    s.start()
    sid = s.create(entrypoint=["sh", "-c", NOISY]).json()["id"]
    logs = wait_for(lambda: (lambda j: j if "diag-marker-1" in j["content"] else None)(
        descriptor(s, sid, "logs", "container")), "the entrypoint's output in the logs", 15)
    c = logs["content"]
    check("\ufffd\ufffd bad bytes" in c and "\x1b" not in c and "\x01" not in c,
          "hostile bytes: U+FFFD for invalid UTF-8 and controls: %r" % c[-200:])
    check('{"code":"fake"}' in c and not logs["truncated"], "text passed as text, whole")
    for bad, what in ((None, "missing"), ("", "empty"), ("nope", "unknown"),
                      ("runtime", "an events scope on logs")):
        r = diag(s, sid, "logs", bad)
        check(r.status == 400 and "scope" in r.json()["message"], "scope %s: 400: %r" % (what, r))
    r = diag(s, sid, "events", "container")
    check(r.status == 400, "a logs scope on events: 400")
    check(diag(s, "00000000-0000-4000-8000-000000000000", "logs", "all").status == 404,
          "an unknown sandbox: 404")
    check(diag(s, sid, "logs", "all", key=False).status == 401, "the key is required")

    check(s.request("POST", "/v1/sandboxes/%s/pause" % sid).status == 202, "pause")
    check(s.request("POST", "/v1/sandboxes/%s/resume" % sid).status == 202, "resume")
    ev = descriptor(s, sid, "events", "lifecycle")["content"].splitlines()
    states = [line.split()[2] for line in ev]
    order = [x for i, x in enumerate(states) if i == 0 or x != states[i - 1]]
    check(order == ["Pending", "Running", "Pausing", "Paused", "Resuming", "Running"],
          "lifecycle events in order: %r" % ev)
    rt = descriptor(s, sid, "events", "runtime")["content"]
    check("runtime provider" in rt and "Running" in rt, "the provider's view: %r" % rt)
    both = descriptor(s, sid, "events", "all")["content"]
    check("== lifecycle" in both and "== runtime" in both, "events/all: both: %r" % both)
    allogs = descriptor(s, sid, "logs", "all")["content"]
    check("== container" in allogs and "diag-marker-1" in allogs and "== lifecycle" in allogs,
          "logs/all: container and lifecycle")

    # a flood: execd's ring keeps the newest bytes; the answer says it is not everything
    flood = s.create(entrypoint=["sh", "-c", "yes flood-line | head -c 3000000; "
                                             "echo flood-end; exec sleep 3600"]).json()["id"]
    j = wait_for(lambda: (lambda d: d if "flood-end" in d["content"] else None)(
        descriptor(s, flood, "logs", "container")), "the flood's end in the logs", 30)
    check(j["truncated"] and "older bytes were dropped" in j["content"] and
          len(j["content"].encode()) <= 1 << 20, "a flood: truncated, bounded: %d bytes"
          % len(j["content"]))

    # events survive a restart of the server (they are in the store with the record)
    check(s.stop() == 0, "clean stop")
    s.start()
    ev2 = descriptor(s, sid, "events", "lifecycle")["content"].splitlines()
    check(ev2[:len(ev)] == ev, "the events after a restart: %r" % ev2)
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    check(diag(s, sid, "events", "lifecycle").status == 404, "gone with its sandbox")
    s.request("DELETE", "/v1/sandboxes/" + flood)
    check(s.stop() == 0, "clean stop")
    print("ok   diagnostics: container logs (hostile bytes, a flood), lifecycle events "
          "(pause/resume, a restart), runtime, all, refusals", flush=True)


if __name__ == "__main__":
    main(test)
