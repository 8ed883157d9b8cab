#!/usr/bin/env python3
"""GET /metrics: Prometheus' text format (every sample line parses, histograms cumulative with
+Inf = count), behind the API key unless `server.metrics_auth = false`; the figures move with
what the server does: sandboxes by provider and state, operation histograms, a failed create
counted, router bytes and requests, the store's writes, the process' RSS, fds and threads;
per native sandbox its memory, CPU seconds and tasks.
And the server's log: a request's X-Request-ID on every line logged for it (its create job's
too), as `rid` in JSON lines and `[rid]` with --log-format text."""
import json
import os
import re
import signal

from harness import check, main, wait_for

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (-?[0-9.e+]+|\+Inf|NaN)$')


def scrape(s, key=True):
    r = s.request("GET", "/metrics", key=key)
    check(r.status == 200, "GET /metrics: %r" % r)
    ctype = dict((k.lower(), v) for k, v in r.headers).get("content-type", "")
    check(ctype.startswith("text/plain; version=0.0.4"), "the exposition content type: %s" % ctype)
    out = {}
    for line in r.body.decode().splitlines():
        if not line or line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        m = SAMPLE.match(line)
        check(m is not None, "a sample line that parses: %r" % line)
        out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def histo_ok(m, name, labels):
    """Buckets cumulative, +Inf equal to _count."""
    sep = "," if labels else ""
    vals = [(k, v) for k, v in m.items() if k.startswith(name + "_bucket{" + labels + sep)]
    check(vals, "%s{%s} has buckets" % (name, labels))
    counts = [v for _, v in vals]
    check(counts == sorted(counts), "%s buckets cumulative: %r" % (name, counts))
    inf = m[name + "_bucket{" + labels + sep + 'le="+Inf"}']
    check(inf == m[name + "_count{" + labels + "}"], "%s +Inf == count" % name)
    return inf


def request_ids(s):
    """Every line logged for a request carries its X-Request-ID, the create job's too."""
    rid = "trace-json-7"
    r = s.request("POST", "/v1/sandboxes", {"image": {"uri": "host"},
                                            "entrypoint": ["sleep", "60"], "timeout": 120},
                  headers={"X-Request-ID": rid})
    check(r.status == 202, "create: %r" % r)
    s.request("DELETE", "/v1/sandboxes/" + r.json()["id"], headers={"X-Request-ID": rid + "-d"})
    mine = []
    for line in s.log(full=True).splitlines():
        j = json.loads(line) if line.startswith("{") else {}
        if j.get("rid") == rid:
            mine.append(j["msg"])
    check(any("running" in x for x in mine), "the create job's line has the request's id: %r"
          % mine)
    check(any("deleted" in x for x in s.log(full=True).splitlines() if rid + "-d" in x),
          "the delete's line has its own id")


def per_sandbox(new_server):
    """Native sandboxes: their memory, CPU seconds and tasks (from their cgroups), labelled by
    sandbox, moving with what they do; gone with the sandbox."""
    s = new_server(config_text='providers = { supported = ["native"]; default = "native"; };\n',
                   tag="metrics-native")
    s.start()
    r = s.create()
    if r.status != 202:
        print("per-sandbox figures skipped: no native sandbox here: %r" % r)
        return
    sid = r.json()["id"]
    lab = '{sandbox="%s",provider="native"}' % sid
    m0 = scrape(s)
    check(m0.get("sbx_sandbox_pids" + lab, 0) >= 2, "its tasks (execd, the entrypoint): %r"
          % {k: v for k, v in m0.items() if k.startswith("sbx_sandbox_")})
    s.run(sid, "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; "
               "head -c 64m /dev/zero > /dev/shm/fill")
    m1 = scrape(s)
    cpu = "sbx_sandbox_cpu_seconds_total" + lab
    if cpu in m0:
        check(m1[cpu] > m0[cpu], "CPU seconds grow with work")
    else:  # cgroup v1 with cpuacct mounted apart from cpu: no per-sandbox cpuacct is made
        print("per-sandbox CPU seconds: not on this host (cpuacct mounted apart from cpu)")
    check(m1["sbx_sandbox_memory_bytes" + lab] >= m0["sbx_sandbox_memory_bytes" + lab] + (48 << 20),
          "memory grows with a 64 MiB file in its /dev/shm: %r -> %r"
          % (m0["sbx_sandbox_memory_bytes" + lab], m1["sbx_sandbox_memory_bytes" + lab]))
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    check(not [k for k in scrape(s) if sid in k], "a deleted sandbox has no figures")
    check(s.stop() == 0, "clean stop")


def test(new_server):
    s = new_server(tag="metrics")
    s.start()
    check(s.request("GET", "/metrics", key=False).status == 401, "the key is required by default")
    before = scrape(s)
    check(before["process_open_fds"] > 3 and before["process_threads"] >= 2 and
          before["process_resident_memory_bytes"] > 1 << 20, "process figures: %r" %
          {k: v for k, v in before.items() if k.startswith("process_")})
    sid = s.create().json()["id"]
    s.run(sid, "echo hello-metrics")
    check(s.request("POST", "/v1/sandboxes/%s/pause" % sid).status == 202, "pause")
    check(s.request("POST", "/v1/sandboxes/%s/resume" % sid).status == 202, "resume")
    # a provider failure: the sandbox's processes killed behind the server's back, then a pause
    doomed = s.create().json()["id"]
    pids_of = s.sandbox_pids()
    check(doomed in pids_of, "the doomed sandbox's processes: %r" % list(pids_of))
    for pids in (pids_of[doomed],):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    wait_for(lambda: not any(os.path.exists("/proc/%d" % p) and
                             open("/proc/%d/stat" % p).read().split(")")[-1].split()[0] != "Z"
                             for p in pids_of[doomed]) or None, "the doomed processes gone", 10)
    r = s.request("POST", "/v1/sandboxes/%s/pause" % doomed)
    check(r.status == 409, "the pause of a dead sandbox fails: %r" % r)
    m = scrape(s)
    prov = [k for k in m if k.startswith("sbx_sandboxes{")]
    check(m.get('sbx_sandboxes{provider="process",state="Running"}', 0) == 2,
          "Running sandboxes by provider: %r" % {k: m[k] for k in prov})
    for op in ("create", "pause", "resume"):
        n = histo_ok(m, "sbx_operation_seconds", 'op="%s"' % op)
        check(n >= 1, "%s counted: %r" % (op, n))
    check(m['sbx_operation_failures_total{op="pause"}'] == 1, "the failed pause counted")
    check(m.get('sbx_provider_errors_total{provider="process",code="conflicting state"}') == 1,
          "the provider's error counted by provider and code: %r"
          % {k: v for k, v in m.items() if "provider_errors" in k})
    routed = histo_ok(m, "sbx_router_request_seconds", "")
    check(routed >= 1 and m['sbx_router_bytes_total{direction="from_sandbox"}'] >
          before['sbx_router_bytes_total{direction="from_sandbox"}'], "router requests and bytes")
    check(histo_ok(m, "sbx_store_write_seconds", "") > histo_ok(before, "sbx_store_write_seconds",
                                                                 ""), "store writes counted")
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    s.request("DELETE", "/v1/sandboxes/" + doomed)
    check(histo_ok(scrape(s), "sbx_operation_seconds", 'op="delete"') >= 1, "delete counted")
    request_ids(s)
    check(s.stop() == 0, "clean stop")
    per_sandbox(new_server)

    p = new_server(config_text="server = { metrics_auth = false; };\n", tag="metrics-open")
    p.extra_args = ["--log-format", "text"]
    p.start()
    rid = "trace-text-42"
    r = p.request("POST", "/v1/sandboxes", {"image": {"uri": "host"}, "entrypoint": ["sleep", "60"],
                                             "timeout": 120}, headers={"X-Request-ID": rid})
    check(r.status == 202, "create: %r" % r)
    p.request("DELETE", "/v1/sandboxes/" + r.json()["id"])
    lines = [x for x in p.log(full=True).splitlines() if "[%s]" % rid in x]
    check(any("running" in x for x in lines) and not any(x.startswith("{") for x in lines),
          "--log-format text: plain lines with [rid]: %r" % lines)
    scrape(p, key=False)
    check(p.request("GET", "/v1/sandboxes", key=False).status == 401,
          "metrics_auth = false opens /metrics only")
    check(p.stop() == 0, "clean stop")
    bad_cfg = new_server(config_text='server = { metrics_auth = "no"; };\n', tag="metrics-bad")
    check(bad_cfg.start(expect_fail=True) != 0 and "metrics_auth" in bad_cfg.log(),
          "a wrong type is refused, naming the key: %s" % bad_cfg.log()[-300:])
    print("ok   /metrics: format, auth, sandboxes, operations, failures, router, store, process",
          flush=True)


if __name__ == "__main__":
    main(test)
