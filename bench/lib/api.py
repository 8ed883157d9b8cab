#!/usr/bin/env python3
"""Sections 2-7 of the sbx benchmark: everything measured through the OpenSandbox API.

Written against the documented wire behaviour (shared/reference/opensandbox/COMPAT.md):
lifecycle on the server (`/v1/sandboxes...`, header OPEN-SANDBOX-API-KEY), commands and files
on execd (port 44772, reached through `GET /v1/sandboxes/{id}/endpoints/44772`, directly or
with `use_server_proxy=true` through the server). Python 3 stdlib only.
  api.py run --work W --url URL --api-key KEY --mode quick|full --image URI [--server-pid P]
  api.py execd --work W --url URL --mode quick|full [--pid P]   (a host sbx-execd: exec, files)
  api.py skip-all --work W --reason TEXT     (records every planned measurement as not measured)
  api.py target --variant cold --work W --url URL ... | --reason TEXT   (the issue's speed target
         against a second server the driver started, or recorded as not measured)
  api.py delete-all --url URL --api-key KEY  (every sandbox of a server the driver started)
Every verb takes --only SECTIONS (comma-separated: tti,exec,pause,files,code,pool,api,density): the rest
is neither run nor listed.
"""

import argparse
import concurrent.futures
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

import bench
import stats

MIB = 1024 * 1024

# (section, id, variant, what): every measurement this file makes, so that a run without a
# server still lists each one as "not measured" with the reason.
PLAN = [
    ("tti", "tti.serial", "serial", "create -> first command result -> delete, one at a time"),
    ("tti", "tti.par10", "10 parallel", "10 clients at once, each create -> first result -> delete"),
    ("tti", "tti.par50", "50 parallel", "50 clients at once, each create -> first result -> delete"),
    ("tti", "tti.target", "warm (server defaults)",
     "issue target: API create -> first result -> delete p50 <= 2x `sbx run` p50, interleaved"),
    ("exec", "exec.proxy", "via server proxy", "POST /command `true` through /sandboxes/{id}/proxy/44772"),
    ("exec", "exec.direct", "execd direct", "POST /command `true` straight to execd's endpoint"),
    ("density", "density.idle", "idle sandboxes", "memory per idle sandbox and count at first failure"),
    ("pause", "pause.pause", "pause", "POST /pause until GET says Paused"),
    ("pause", "pause.resume", "resume", "POST /resume until GET says Running"),
    ("files", "files.direct", "execd direct", "upload + download 1 MiB / 100 MiB / 1 GiB"),
    ("files", "files.proxy", "via server proxy", "upload + download 1 MiB / 100 MiB / 1 GiB"),
    ("code", "code.cold", "kernel started by the first run",
     "POST /code python `1+1` to its result, 2 s after the create: the kernel starts on demand"),
    ("code", "code.warm", "SBX_WARM_KERNEL=python",
     "POST /code python `1+1` to its result, 2 s after the create: the warm kernel answers"),
    ("code", "code.warm.create", "SBX_WARM_KERNEL=python, at once",
     "create -> POST /code python `1+1` to its result, no pause (the warm kernel still starting)"),
    ("snapshot", "snapshot.capture", "10 MB layer, to the 202 (captured)",
     "POST /sandboxes/{id}/snapshots -> 202 (the files captured, the sandbox frozen for the copy)"),
    ("snapshot", "snapshot.ready", "10 MB layer, to Ready (image written)",
     "POST /sandboxes/{id}/snapshots -> GET says Ready (the image written)"),
    ("snapshot", "snapshot.restore", "create from snapshotId",
     "create from the snapshot -> first command result"),
    ("snapshot", "snapshot.create", "create from the image",
     "create from the snapshot's base image -> first command result (the restore's reference)"),
    ("pool", "pool.exec", "one exec round trip (the reference)",
     "POST /command `true` on a running sandbox through its endpoint, kept-alive connection"),
    ("pool", "pool.pooled", "pooled create (extensions.poolRef)",
     "POST /v1/sandboxes with extensions.poolRef -> endpoint -> first `true` result"),
    ("pool", "pool.unpooled", "unpooled create",
     "POST /v1/sandboxes -> endpoint -> execd /ping -> first `true` result"),
    ("api", "api.get", "GET /v1/sandboxes/{id}", "wrk, 2 threads, 16 connections"),
    ("api", "api.list", "GET /v1/sandboxes", "wrk, 2 threads, 16 connections"),
]

PLAN_INDEX = {rid: (variant, what) for _, rid, variant, what in PLAN}

PEER_SKIPS = [
    (
        "tti",
        "tti.serial.opensandbox",
        "OpenSandbox (docker runtime)",
        "serial",
        "the OpenSandbox server is a Python package from PyPI and its execd an image from a "
        "remote registry; this bench installs only Debian/npm packages and has no registry access",
    ),
]

CONFIG = {
    "full": {"serial": 30, "par10_rounds": 3, "par50_rounds": 1, "exec": 200, "exec_warm": 10,
             "density_cap": 100, "pause": 30, "sizes": [1, 100, 1024], "wrk_secs": 10,
             "target_rounds": 10, "target_runs": 20, "pool": 200},
    "quick": {"serial": 5, "par10_rounds": 1, "par50_rounds": 0, "exec": 30, "exec_warm": 3,
              "density_cap": 10, "pause": 5, "sizes": [1, 100], "wrk_secs": 3,
              "target_rounds": 3, "target_runs": 5, "pool": 20},
}


class ApiError(Exception):
    pass


class NoDelayConnection(http.client.HTTPConnection):
    """TCP_NODELAY so the client never adds Nagle/delayed-ACK stalls to what is measured."""

    def connect(self):
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Client:
    """One keep-alive HTTP/1.1 connection per thread to one base URL."""

    def __init__(self, base, headers=None):
        self.base = base if "://" in base else "http://" + base
        u = urllib.parse.urlsplit(self.base)
        self.host, self.port = u.hostname, u.port or 80
        self.prefix = u.path.rstrip("/")
        self.headers = dict(headers or {})
        self.local = threading.local()

    def conn(self):
        c = getattr(self.local, "conn", None)
        if c is None:
            c = NoDelayConnection(self.host, self.port, timeout=120)
            self.local.conn = c
        return c

    def drop(self):
        c = getattr(self.local, "conn", None)
        if c is not None:
            c.close()
        self.local.conn = None

    def start(self, method, path, body=None, headers=None):
        h = dict(self.headers)
        h.update(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        replayable = body is None or isinstance(body, (bytes, str))
        for attempt in (0, 1):  # a kept-alive connection the server closed: retry once
            try:
                c = self.conn()
                c.request(method, self.prefix + path, body=body, headers=h)
                return c.getresponse()
            except (http.client.HTTPException, ConnectionError, OSError):
                self.drop()
                if attempt or not replayable:  # a streamed body cannot be sent twice
                    raise
        raise ApiError("unreachable")

    def call(self, method, path, body=None, expect=(200,), headers=None):
        resp = self.start(method, path, body, headers)
        data = resp.read()
        if resp.status not in expect:
            raise ApiError(f"{method} {path}: HTTP {resp.status} {data[:200]!r}")
        return json.loads(data) if data and data[:1] in (b"{", b"[") else data


class Lifecycle:
    def __init__(self, url, key, image, provider=None):
        self.provider = provider
        self.api = Client(url.rstrip("/") + "/v1", {"OPEN-SANDBOX-API-KEY": key})
        self.url, self.key, self.image = url.rstrip("/"), key, image
        self.live = set()
        self.lock = threading.Lock()

    def create(self, env=None):
        body = {
            "image": {"uri": self.image},
            "entrypoint": ["tail", "-f", "/dev/null"],
            "timeout": 900,  # a sandbox the bench fails to delete still goes away
            "resourceLimits": {"cpu": "1", "memory": "512Mi"},
            "env": dict(env or {}),
            "metadata": {"sbx-bench": str(os.getpid())},
        }
        if self.provider:
            body["extensions"] = {"provider": self.provider}
        resp = self.api.call("POST", "/sandboxes", body, expect=(200, 201, 202))
        sid = resp["id"]
        PROVIDER["name"] = PROVIDER["name"] or resp.get("provider") or resp.get("extensions", {}).get("provider")
        with self.lock:
            self.live.add(sid)
        return sid

    def create_from(self, snapshot):
        """A sandbox restored from a snapshot (entrypoint: the server's default)."""
        body = {"snapshotId": snapshot, "timeout": 900,
                "resourceLimits": {"cpu": "1", "memory": "512Mi"},
                "metadata": {"sbx-bench": str(os.getpid())}}
        if self.provider:
            body["extensions"] = {"provider": self.provider}
        sid = self.api.call("POST", "/sandboxes", body, expect=(202,))["id"]
        with self.lock:
            self.live.add(sid)
        return sid

    def delete(self, sid):
        self.api.call("DELETE", f"/sandboxes/{sid}", expect=(200, 202, 204))
        with self.lock:
            self.live.discard(sid)

    def state(self, sid):
        return self.api.call("GET", f"/sandboxes/{sid}")["status"]["state"]

    def execd(self, sid, proxy=False):
        q = "?use_server_proxy=true" if proxy else ""
        ep = self.api.call("GET", f"/sandboxes/{sid}/endpoints/44772{q}")
        return Client(ep["endpoint"], ep.get("headers"))

    def cleanup(self):
        for sid in list(self.live):
            try:
                self.delete(sid)
            except (ApiError, OSError) as e:
                print(f"api.py: could not delete sandbox {sid}: {e}", file=sys.stderr)


def wait_ping(execd, deadline_s=30):
    end = time.monotonic() + deadline_s
    while True:
        try:
            execd.call("GET", "/ping")
            return
        except (ApiError, OSError):
            if time.monotonic() > end:
                raise
            time.sleep(0.005)


def run_command(execd, command="true"):
    """POST /command and read the stream to its end; True when it ended in execution_complete."""
    resp = execd.start("POST", "/command", {"command": command})
    if resp.status != 200:
        raise ApiError(f"POST /command: HTTP {resp.status} {resp.read()[:200]!r}")
    terminal = None
    for raw in resp:
        line = raw.strip()
        if line.startswith(b"data:"):
            line = line[5:].strip()
        if not line.startswith(b"{"):
            continue
        ev = json.loads(line)
        if ev.get("type") in ("execution_complete", "error"):
            terminal = ev
    if terminal is None:
        raise ApiError("POST /command: stream ended without a terminal event")
    return terminal["type"] == "execution_complete"


def run_python(execd, code="1+1"):
    """POST /code (the default Python context) and read the stream to its end; True when it
    ended in execution_complete with a result."""
    resp = execd.start("POST", "/code", {"context": {"language": "python"}, "code": code})
    if resp.status != 200:
        raise ApiError(f"POST /code: HTTP {resp.status} {resp.read()[:200]!r}")
    kinds = []
    for raw in resp:
        line = raw.strip()
        if line.startswith(b"data:"):
            line = line[5:].strip()
        if line.startswith(b"{"):
            kinds.append(json.loads(line).get("type"))
    return "result" in kinds and kinds[-1:] == ["execution_complete"]


PROVIDER = {"name": None}


def record(work, rec):
    """bench.write_record, with the server's provider (from the create response) on sbx rows."""
    if PROVIDER["name"] and rec.get("tool") == "sbx":
        rec["provider"] = PROVIDER["name"]
        rec["variant"] = f"{rec.get('variant', '')} [{PROVIDER['name']} provider]"
    bench.write_record(work, rec)


def latency_record(section, rid, variant, what, samples, codes, extra=None):
    rec = {"section": section, "id": rid, "tool": "sbx", "variant": variant, "what": what,
           "command": "", "kind": "latency", "unit": "s", "status": "measured",
           "timer": "client-side time.monotonic", "samples": samples, "exit_codes": codes}
    rec.update(extra or {})
    if codes and all(c != 0 for c in codes):
        rec["status"] = "failed"
        rec["reason"] = (extra or {}).get("first_error", "every run failed")
    return rec


def timed(fn):
    """(seconds, exit code, error text) of one call; a failed call is a failure, not dropped."""
    t0 = time.monotonic()
    try:
        ok = fn()
        return time.monotonic() - t0, 0 if ok is not False else 1, None
    except (ApiError, OSError, KeyError, ValueError, http.client.HTTPException) as e:
        return time.monotonic() - t0, 1, str(e)[:300]


# ------------------------------------------------------------------ 2. time to interactive
def tti_cycle(lc):
    """Seconds to the first command result, then seconds until the delete returned."""
    t0 = time.monotonic()
    sid = lc.create()
    execd = lc.execd(sid)
    wait_ping(execd)
    ok = run_command(execd)
    t1 = time.monotonic()
    lc.delete(sid)
    execd.drop()
    if not ok:
        raise ApiError("first command did not complete")
    return t1 - t0, time.monotonic() - t0


def tti_batch(lc, clients, rounds):
    first, total, codes, errors = [], [], [], []
    for _ in range(rounds):
        barrier = threading.Barrier(clients)

        def one(_i):
            barrier.wait()
            return tti_once(lc)

        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            for f, t, err in pool.map(one, range(clients)):
                first.append(f)
                total.append(t)
                codes.append(0 if err is None else 1)
                if err:
                    errors.append(err)
    return first, total, codes, errors


def section_tti(lc, cfg, work):
    plan = [("tti.serial", "serial", 1, cfg["serial"]), ("tti.par10", "10 parallel", 10, cfg["par10_rounds"]),
            ("tti.par50", "50 parallel", 50, cfg["par50_rounds"])]
    for rid, variant, clients, rounds in plan:
        what = (f"POST /v1/sandboxes -> endpoint -> execd /ping -> first `true` result, {clients} "
                f"client(s) at once x {rounds} round(s); delete time in 'with_delete'")
        if rounds == 0:
            skip(work, "tti", rid, variant, what, "skipped in --quick mode")
            continue
        first, total, codes, errors = tti_batch(lc, clients, rounds)
        extra = {"with_delete": stats.summarize(total, codes), "ratio_key": rid}
        if errors:
            extra["first_error"] = errors[0]
        record(work, latency_record("tti", rid, variant, what, first, codes, extra))


# ------------------------------------------------------------------ 2. the speed target
# "Create -> first command result (`true`) -> delete through the API p50 <= 2x the runtime's own
# `sbx run` p50": both sides with the same image (host) and network mode, interleaved round by
# round so that background load on a shared machine hits both alike.
TARGET_LIMIT = 2.0
TARGET = {"warm": ("tti.target", "warm (server defaults)"), "cold": ("tti.target.cold", "cold (netns_pool = 0)")}


def loadavg():
    with open("/proc/loadavg", encoding="utf-8") as f:
        return f.read().split()[:3]


def target_command(args):
    """`sbx run` with the API creates' image (no --rootfs; `host` is its default) and network."""
    cmd = [args.sbx, "run", "--network", args.net]
    if args.image != "host":
        cmd += ["--image", args.image]
    return cmd + ["--", "/bin/true"]


def target_what(args, cfg):
    return (f"API: POST /v1/sandboxes (image {args.image}) -> endpoint -> execd /ping -> first `true` result "
            f"-> DELETE, one at a time; runtime: `sbx run --network {args.net} -- /bin/true` (hyperfine -N, "
            f"2 warm-up runs per round); {cfg['target_rounds']} rounds of {cfg['target_runs']} of each, "
            f"`sbx run` first; target: API p50 (with the delete) <= {TARGET_LIMIT:g}x `sbx run` p50")


def target_unrunnable(args):
    """Why the target cannot be measured here (None when it can)."""
    if not args.hyperfine or not os.access(args.hyperfine, os.X_OK):
        return "hyperfine not installed"
    if not args.sbx or not os.access(args.sbx, os.X_OK):
        return f"no sbx binary ({args.sbx or 'none given'})"
    probe = subprocess.run([args.sbx, "run", "--help"], capture_output=True, check=False)
    if probe.returncode != 0:
        return f"sbx run not built yet ({args.sbx} has no 'run' verb)"
    return None


def hyperfine_round(args, cmd, runs, out):
    """One round of `sbx run`: (times, exit codes, error text or None)."""
    res = subprocess.run([args.hyperfine, "-N", "-i", "--style", "none", "--runs", str(runs), "--warmup", "2",
                          "--export-json", out, "--", " ".join(cmd)],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        return [], [], (res.stderr or res.stdout).strip()[-300:] or f"hyperfine exited {res.returncode}"
    return bench.load_hyperfine(out) + (None,)


def tti_once(lc):
    """tti_cycle timed: (to first result, with delete, error text or None)."""
    t0 = time.monotonic()
    try:
        return tti_cycle(lc) + (None,)
    except (ApiError, OSError, KeyError, ValueError, http.client.HTTPException) as e:
        dt = time.monotonic() - t0
        return dt, dt, str(e)[:300]


def section_target(lc, cfg, work, args, key):
    rid, variant = TARGET[key]
    what = target_what(args, cfg)
    why = target_unrunnable(args)
    if why:
        skip(work, "tti", rid, variant, what, why)
        return
    cmd = target_command(args)
    hf_dir = tempfile.mkdtemp(prefix=f"{rid}-", dir=work)
    run_t, run_c, run_err, first, total, codes, errors = [], [], [], [], [], [], []
    load_before = loadavg()
    for r in range(cfg["target_rounds"]):
        t, c, err = hyperfine_round(args, cmd, cfg["target_runs"], os.path.join(hf_dir, f"round{r + 1}.json"))
        run_t += t
        run_c += c
        if err:
            run_err.append(f"round {r + 1}: {err}")
        for _ in range(cfg["target_runs"]):
            f, w, err = tti_once(lc)
            first.append(f)
            total.append(w)
            codes.append(0 if err is None else 1)
            if err:
                errors.append(err)
    load_after = loadavg()
    api_s, run_s = stats.summarize(total, codes), stats.summarize(run_t, run_c)
    ratio = stats.ratio(api_s.get("p50"), run_s.get("p50"))
    extra = {"ratio_key": "tti.target", "label": variant, "network": args.net, "image": args.image,
             "rounds": cfg["target_rounds"], "runs_per_round": cfg["target_runs"],
             "loadavg_before": load_before, "loadavg_after": load_after,
             "to_first_result": {"samples": first, "summary": stats.summarize(first, codes)},
             "sbx_run": {"command": " ".join(cmd), "timer": "hyperfine -N -i, 2 warm-up runs per round (not kept)",
                         "samples": run_t, "exit_codes": run_c, "summary": run_s, "errors": run_err},
             "target": {"limit": TARGET_LIMIT, "api_p50": api_s.get("p50"), "sbx_run_p50": run_s.get("p50"),
                        "ratio": ratio,
                        "verdict": None if ratio is None else "met" if ratio <= TARGET_LIMIT else "missed"}}
    if errors:
        extra["first_error"] = errors[0]
    rec = latency_record("tti", rid, variant, what, total, codes, extra)
    if rec["status"] == "measured" and ratio is None:
        rec["status"] = "failed"
        rec["reason"] = "`sbx run` failed in every run: " + (run_err[0] if run_err else "non-zero exit")
    record(work, rec)


# ------------------------------------------------------------------ pools: a warm sandbox
# "A pooled create -> first command result within 1.5x of one exec round trip (p50)": the three
# measured side by side, round by round - a take from a pool of warm sandboxes, an ordinary
# create, and one `true` on a sandbox that is already running. Between two takes the pool is
# refilled (not timed), so each take finds a warm sandbox, as a pool sized for its load does.
POOL_LIMIT = 1.5
POOL_NAME = "sbx-bench"
SETTLE_S = 0.05


def pool_available(lc):
    return lc.api.call("GET", f"/pools/{POOL_NAME}")["status"]["available"]


def wait_pool(lc, n, deadline_s=60):
    end = time.monotonic() + deadline_s
    while pool_available(lc) < n:
        if time.monotonic() > end:
            raise ApiError(f"pool {POOL_NAME} did not refill to {n} within {deadline_s} s")
        time.sleep(0.01)


def pooled_once(lc):
    """(seconds to the first result of a pooled create, error text or None); deletes it after."""
    body = {"extensions": {"poolRef": POOL_NAME}, "timeout": 900,
            "metadata": {"sbx-bench": str(os.getpid())}}
    t0 = time.monotonic()
    sid = None
    try:
        sid = lc.api.call("POST", "/sandboxes", body, expect=(200, 201, 202))["id"]
        with lc.lock:
            lc.live.add(sid)
        execd = lc.execd(sid)
        ok = run_command(execd)  # a warm sandbox's execd is up: no /ping first
        dt = time.monotonic() - t0
        execd.drop()
        return dt, None if ok else "first command did not complete"
    except (ApiError, OSError, KeyError, ValueError, http.client.HTTPException) as e:
        return time.monotonic() - t0, str(e)[:300]
    finally:
        if sid:
            lc.delete(sid)


def section_pool(lc, cfg, work):
    tmpl = {"image": {"uri": lc.image}, "entrypoint": ["tail", "-f", "/dev/null"],
            "resourceLimits": {"cpu": "1", "memory": "512Mi"}}
    if lc.provider:
        tmpl["provider"] = lc.provider
    lc.api.call("DELETE", f"/pools/{POOL_NAME}", expect=(204, 404))
    lc.api.call("POST", "/pools", {"name": POOL_NAME, "template": tmpl, "capacitySpec": {
        "bufferMax": 2, "bufferMin": 2, "poolMax": 4, "poolMin": 0}}, expect=(201,))
    base = lc.create()
    res = {k: ([], [], []) for k in ("exec", "pooled", "unpooled")}  # samples, codes, errors
    try:
        execd = lc.execd(base)
        wait_ping(execd)
        for _ in range(3):  # warm-up of every path (not kept)
            run_command(execd)
        wait_pool(lc, 2)
        pooled_once(lc)
        tti_once(lc)
        for _ in range(cfg["pool"]):
            # each measurement on a quiet machine: the pool refilled, the last delete's
            # teardown (a runtime thread, after the 204) given time to end
            samples = {}
            for k in ("exec", "pooled", "unpooled"):
                wait_pool(lc, 2)
                time.sleep(SETTLE_S)
                if k == "exec":
                    t, c, err = timed(lambda: run_command(execd))
                    samples[k] = (t, None if c == 0 else (err or "failed"))
                elif k == "pooled":
                    samples[k] = pooled_once(lc)
                else:
                    f, _, err = tti_once(lc)
                    samples[k] = (f, err)
            for k, (t, err) in samples.items():
                res[k][0].append(t)
                res[k][1].append(0 if err is None else 1)
                if err:
                    res[k][2].append(err)
    finally:
        lc.delete(base)
        lc.api.call("DELETE", f"/pools/{POOL_NAME}", expect=(204, 404))
    ex = stats.summarize(res["exec"][0], res["exec"][1])
    for k in ("exec", "pooled", "unpooled"):
        rid = "pool." + k
        variant, what = PLAN_INDEX[rid]
        samples, codes, errors = res[k]
        s = stats.summarize(samples, codes)
        extra = {"ratio_key": "pool", "rounds": cfg["pool"]}  # one table order, one plot
        if errors:
            extra["first_error"] = errors[0]
        if k != "exec":
            r50 = stats.ratio(s.get("p50"), ex.get("p50"))
            r99 = stats.ratio(s.get("p99"), ex.get("p99"))
            extra["vs_exec"] = {"p50_ratio": r50, "p99_ratio": r99, "exec_p50": ex.get("p50"),
                                "exec_p99": ex.get("p99")}
            if k == "pooled":
                extra["vs_exec"]["limit"] = POOL_LIMIT
                extra["vs_exec"]["verdict"] = None if r50 is None else "met" if r50 <= POOL_LIMIT else "missed"
        record(work, latency_record("pool", rid, variant, what, samples, codes, extra))


# ------------------------------------------------------------------ 3. exec round trip
def exec_record(execd, rid, variant, cfg, work):
    """Two records: over one kept-alive connection (what SDKs do), and a new connection per call."""
    for suffix, label, fresh in (("", "kept-alive connection", False), (".fresh", "new connection per command", True)):
        def once():
            if fresh:
                execd.drop()
            return run_command(execd)

        what = f"POST /command `true` until the SSE stream ends, {variant}, {label}; endpoint {execd.base}"
        warm = [timed(once) for _ in range(cfg["exec_warm"])]
        runs = [timed(once) for _ in range(cfg["exec"])]
        errs = [r[2] for r in runs if r[2]]
        rec = latency_record("exec", rid + suffix, f"{variant}, {label}", what, [r[0] for r in runs],
                             [r[1] for r in runs], {"first_error": errs[0]} if errs else None)
        rec["warmup"] = {"samples": [r[0] for r in warm], "exit_codes": [r[1] for r in warm]}
        if rid == "exec.direct" and not fresh:
            rec["ratio_key"] = "exec"  # the SDK's path: execd endpoint, kept-alive connection
        record(work, rec)


def section_exec(lc, cfg, work):
    sid = lc.create()
    for rid, variant, proxy in (("exec.direct", "execd direct", False), ("exec.proxy", "via server proxy", True)):
        try:
            execd = lc.execd(sid, proxy)
            wait_ping(execd)
        except (ApiError, OSError, KeyError) as e:
            skip(work, "exec", rid, variant, "exec round trip", f"endpoint not usable: {e}")
            continue
        if not proxy and "/proxy/" in execd.base:
            variant += " (the server answered with its proxy route)"
        exec_record(execd, rid, variant, cfg, work)
    lc.delete(sid)


# ------------------------------------------------------------------ code: a first Python result
def code_sample(lc, env, pause_s):
    """(seconds from the request (or the create, without a pause) to the result, exit code)."""
    t0 = time.monotonic()
    sid = lc.create(env)
    try:
        execd = lc.execd(sid, True)
        wait_ping(execd)
        if pause_s:
            time.sleep(pause_s)
            t0 = time.monotonic()
        ok = run_python(execd)
        return time.monotonic() - t0, 0 if ok else 1
    finally:
        lc.delete(sid)


def section_code(lc, cfg, work):
    runs = max(3, cfg["exec_warm"])
    warm_env = {"SBX_WARM_KERNEL": "python"}
    for rid, variant, what, env, pause_s in (
            ("code.cold", "kernel started by the first run", "first python result, 2 s after create",
             None, 2.0),
            ("code.warm", "SBX_WARM_KERNEL=python", "first python result, 2 s after create",
             warm_env, 2.0),
            ("code.warm.create", "SBX_WARM_KERNEL=python, at once", "create -> first python result",
             warm_env, 0)):
        samples, codes = [], []
        for _ in range(runs):
            t, c = code_sample(lc, env, pause_s)
            samples.append(t)
            codes.append(c)
        record(work, latency_record("code", rid, variant, what, samples, codes,
                                    {"ratio_key": "code.cold"}))


# ------------------------------------------------------------------ 11. snapshots
def snapshot_base(lc):
    """A BusyBox image imported as a snapshot (POST /snapshots/import): its id."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "scripts"))
    import busybox_image
    resp = lc.api.call("POST", "/snapshots/import", busybox_image.archive("sbx-bench/busybox:1"),
                       expect=(201,))
    return resp["id"]


def restore_sample(lc, snap):
    t0 = time.monotonic()
    sid = lc.create_from(snap)
    try:
        ok = run_command(lc.execd(sid, True), "true")
        return time.monotonic() - t0, 0 if ok else 1
    finally:
        lc.delete(sid)


def snapshot_sample(lc, sid):
    """(202 latency, Ready latency, snapshot id)."""
    t0 = time.monotonic()
    snap = lc.api.call("POST", f"/sandboxes/{sid}/snapshots", {}, expect=(202,))["id"]
    t_capture = time.monotonic() - t0
    while lc.api.call("GET", f"/snapshots/{snap}")["status"]["state"] == "Creating":
        time.sleep(0.002)
    return t_capture, time.monotonic() - t0, snap


def section_snapshot(lc, cfg, work):
    runs = max(3, cfg["exec_warm"])
    base = snapshot_base(lc)
    src = lc.create_from(base)
    execd = lc.execd(src, True)
    run_command(execd, "dd if=/dev/urandom of=/root/ten bs=1M count=10 2>/dev/null")
    cap, ready, codes, snaps = [], [], [], []
    for _ in range(runs):
        c, r, snap = snapshot_sample(lc, src)
        cap.append(c)
        ready.append(r)
        codes.append(0)
        snaps.append(snap)
    lc.delete(src)
    for rid, samples in (("snapshot.capture", cap), ("snapshot.ready", ready)):
        variant, what = PLAN_INDEX[rid]
        record(work, latency_record("snapshot", rid, variant, what, samples, codes))
    for rid, snap in (("snapshot.restore", snaps[0]), ("snapshot.create", base)):
        samples, rcodes = [], []
        for _ in range(runs):
            t, c = restore_sample(lc, snap)
            samples.append(t)
            rcodes.append(c)
        variant, what = PLAN_INDEX[rid]
        record(work, latency_record("snapshot", rid, variant, what, samples, rcodes,
                                    {"ratio_key": "snapshot.create"}))
    for snap in snaps + [base]:
        lc.api.call("DELETE", f"/snapshots/{snap}", expect=(204,))


# ------------------------------------------------------------------ 4. density
def proc_status(pid, field):
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def mem_available():
    with open("/proc/meminfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def execd_pids():
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/comm", encoding="utf-8") as f:
                    if f.read().strip() == "sbx-execd":
                        out.append(int(d))
            except OSError:
                continue
    return out


def cgroup_memory(pid):
    """Memory usage of pid's memory cgroup (v1 memory.usage_in_bytes or v2 memory.current)."""
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if "memory" in ctrls.split(","):
            candidates = [f"/sys/fs/cgroup/memory{path}/memory.usage_in_bytes"]
        elif ctrls == "":
            candidates = [f"/sys/fs/cgroup{path}/memory.current", f"/sys/fs/cgroup/unified{path}/memory.current"]
        else:
            continue
        for c in candidates:
            try:
                with open(c, encoding="utf-8") as f:
                    return int(f.read())
            except OSError:
                continue
    return None


def memory_cgroup_path(pid):
    """pid's memory cgroup (v1 memory hierarchy, or the v2 unified path), None if unknown."""
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if "memory" in ctrls.split(","):
            return path
    for line in lines:
        if line.startswith("0::"):
            return line[3:]
    return None


def pss(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="utf-8") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def accounted_memory(server_pid):
    """Memory of the sandboxes: each distinct sandbox cgroup once; an execd that shares the
    bench's or the server's cgroup (a provider without cgroups) counts by its PSS instead."""
    not_sandbox = {memory_cgroup_path(os.getpid()), memory_cgroup_path(server_pid) if server_pid else None}
    pids = execd_pids()
    seen, cg_sum, own_cg, pss_sum = set(), 0, 0, 0
    for p in pids:
        path = memory_cgroup_path(p)
        if path is not None and path not in not_sandbox:
            own_cg += 1
            if path not in seen:
                seen.add(path)
                cg_sum += cgroup_memory(p) or 0
        else:
            pss_sum += pss(p)
    server = proc_status(server_pid, "VmRSS") if server_pid else None
    return {"execd": len(pids), "cgroup_sum": cg_sum, "cgroup_known": own_cg, "execd_pss_no_cgroup": pss_sum,
            "execd_rss_sum": sum(proc_status(p, "VmRSS") or 0 for p in pids), "server_rss": server or 0,
            "mem_available": mem_available()}


def accounted_total(m):
    return m["cgroup_sum"] + m["execd_pss_no_cgroup"] + m["server_rss"]


def section_density(lc, cfg, work, server_pid):
    base = accounted_memory(server_pid)
    points, first_failure, created = [], None, 0
    for n in range(1, cfg["density_cap"] + 1):
        try:
            sid = lc.create()
            wait_ping(lc.execd(sid))
        except (ApiError, OSError, KeyError) as e:
            first_failure = f"sandbox #{n}: {str(e)[:200]}"
            break
        created = n
        m = accounted_memory(server_pid)
        points.append([n, accounted_total(m) - accounted_total(base), m])
    end = points[-1][2] if points else base
    slope = stats.linear_slope([(p[0], p[1]) for p in points])
    facts = {
        "idle sandboxes created": f"{created} (cap {cfg['density_cap']})",
        "first failure": first_failure or "none before the cap",
        "memory per idle sandbox (slope of accounted memory)": stats.fmt_bytes(slope),
        "execd processes in a cgroup of their own / all": f"{end['cgroup_known']} / {end['execd']} "
        "(the others have no sandbox cgroup and count by their PSS)",
        "execd RSS sum at the end": stats.fmt_bytes(end["execd_rss_sum"]),
        "server RSS before -> after": f"{stats.fmt_bytes(base['server_rss'])} -> {stats.fmt_bytes(end['server_rss'])}",
        "host MemAvailable drop (noisy on a shared host)": stats.fmt_bytes(base["mem_available"] - end["mem_available"]),
    }
    t0 = time.monotonic()
    lc.cleanup()
    facts[f"deleting all {created}"] = f"{time.monotonic() - t0:.2f} s"
    rec = {"section": "density", "id": "density.idle", "tool": "sbx", "variant": "idle sandboxes",
           "what": "idle sandboxes (tail -f /dev/null) created one by one; memory accounted as the sandboxes' "
                   "memory cgroup usage (each cgroup once; PSS of an execd without a cgroup of its own) plus "
                   "the server's RSS growth",
           "command": "", "kind": "curve", "status": "measured" if points else "failed",
           "reason": first_failure or "", "points": [[p[0], p[1]] for p in points], "slope_bytes": slope,
           "samples_detail": [p[2] for p in points], "facts": facts,
           "curve_title": "memory accounted to idle sandboxes", "y_label": "MiB accounted"}
    record(work, rec)


# ------------------------------------------------------------------ 5. pause / resume
def until_state(lc, sid, action, target, deadline_s=30):
    lc.api.call("POST", f"/sandboxes/{sid}/{action}", expect=(200, 202, 204))
    end = time.monotonic() + deadline_s
    while lc.state(sid) != target:
        if time.monotonic() > end:
            raise ApiError(f"{action}: state not {target} after {deadline_s} s")
        time.sleep(0.001)
    return True


def section_pause(lc, cfg, work):
    sid = lc.create()
    wait_ping(lc.execd(sid))
    pause, resume = [], []
    for _ in range(cfg["pause"]):
        pause.append(timed(lambda: until_state(lc, sid, "pause", "Paused")))
        resume.append(timed(lambda: until_state(lc, sid, "resume", "Running")))
    for rid, variant, runs, target in (("pause.pause", "pause", pause, "Paused"),
                                       ("pause.resume", "resume", resume, "Running")):
        errs = [r[2] for r in runs if r[2]]
        what = f"POST /{variant} then GET every 1 ms until state is {target}; idle sandbox"
        extra = {"first_error": errs[0]} if errs else {}
        extra["ratio_key"] = rid
        record(work, latency_record("pause", rid, variant, what, [r[0] for r in runs], [r[1] for r in runs], extra))
    try:
        alive = run_command(lc.execd(sid))
    except (ApiError, OSError) as e:
        alive = f"failed: {e}"
    record(work, {"section": "pause", "id": "pause.alive", "tool": "sbx", "variant": "after resume",
                              "what": "a command runs after the last resume", "kind": "curve", "status": "measured",
                              "facts": {"command after resume": "ok" if alive is True else str(alive)}})
    lc.delete(sid)


# ------------------------------------------------------------------ 6. file transfer
# The client must not be what is measured: the upload's file part goes out with sendfile
# (http.client would copy it through 8 KiB reads), and the download is compared byte for byte
# with the uploaded file as it arrives (a tenth of the CPU of a SHA-256, which made the Python
# client slower than execd). execd's, the server's and the client's CPU time are reported per
# GiB, since wall time on a shared 2-core machine is noisy.
def make_file(path, size):
    block = os.urandom(MIB)
    with open(path, "wb") as f:
        for i in range(size // MIB):
            f.write(block[: MIB - 1] + bytes([i % 251]))  # different blocks, cheap to generate


def proc_cpu(pid):
    """User + system CPU seconds of pid so far (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            x = f.read().rsplit(")", 1)[1].split()
        return (int(x[11]) + int(x[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class CpuMeter:
    """CPU time of execd, the server and this client (one thread) over one transfer."""

    def __init__(self, pids):
        self.pids = {name: pid for name, pid in pids.items() if pid}

    def start(self):
        self.t0 = {name: proc_cpu(pid) for name, pid in self.pids.items()}
        self.c0 = time.process_time()

    def per_gib(self, nbytes):
        if nbytes < 64 * MIB:  # clock ticks are 10 ms: meaningless for small transfers
            return ""
        gib = nbytes / (1024 * MIB)
        parts = []
        for name, pid in self.pids.items():
            now = proc_cpu(pid)
            if now is not None and self.t0[name] is not None:
                parts.append(f"{name} {(now - self.t0[name]) / gib:.2f}")
        parts.append(f"client {(time.process_time() - self.c0) / gib:.2f}")
        return "CPU s/GiB: " + ", ".join(parts)


def upload(execd, src, size, target):
    boundary = "sbxbench" + os.urandom(8).hex()
    meta = json.dumps({"path": target, "mode": 644}).encode()
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"metadata\"; filename=\"metadata\"\r\n"
            f"Content-Type: application/json\r\n\r\n").encode() + meta + (
            f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{os.path.basename(target)}\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    hdrs = dict(execd.headers)
    hdrs.update({"Content-Type": f"multipart/form-data; boundary={boundary}",
                 "Content-Length": str(len(head) + size + len(tail))})
    c = execd.conn()
    try:
        c.putrequest("POST", execd.prefix + "/files/upload", skip_accept_encoding=True)
        for k, v in hdrs.items():
            c.putheader(k, v)
        c.endheaders(head)
        with open(src, "rb") as f:
            c.sock.sendfile(f)
        c.send(tail)
        resp = c.getresponse()
        data = resp.read()
    except (http.client.HTTPException, OSError):
        execd.drop()
        raise
    if resp.status != 200:
        raise ApiError(f"upload: HTTP {resp.status} {data[:200]!r}")


def download(execd, target, src):
    """GET the file; returns (identical to src, bytes received)."""
    resp = execd.start("GET", "/files/download?path=" + urllib.parse.quote(target))
    if resp.status != 200:
        raise ApiError(f"download: HTTP {resp.status} {resp.read()[:200]!r}")
    # Two buffers reused and filled before they are compared: no allocation per read (a fresh
    # 1 MiB is an mmap whose page faults cost more than the compare) and no slice copies,
    # however small the pieces the socket hands out.
    buf, ref = bytearray(MIB), bytearray(MIB)
    n, same = 0, True
    with open(src, "rb") as f, memoryview(buf) as bv, memoryview(ref) as rv:
        while True:
            k = 0
            while k < MIB and (r := resp.readinto(bv[k:])) > 0:
                k += r
            if k == 0:
                break
            got = f.readinto(rv[:k])
            same = same and got == k and (buf == ref if k == MIB else buf[:k] == ref[:k])
            n += k
        same = same and f.read(1) == b""
    return same, n


def peaks(server_pid, execd_pid=0):
    execd = [proc_status(p, "VmHWM") or 0 for p in ([execd_pid] if execd_pid else execd_pids())]
    server = proc_status(server_pid, "VmHWM") if server_pid else None
    return f"peak RSS: server {stats.fmt_bytes(server)}, execd {stats.fmt_bytes(max(execd) if execd else None)}"


def notes(*parts):
    return "; ".join(p for p in parts if p)


def transfer(execd, src, size, pids, target_dir, cpu_pids):
    target = f"{target_dir}/sbxbench-{size}"
    meter = CpuMeter(cpu_pids)
    out = []
    meter.start()
    t0 = time.monotonic()
    try:
        upload(execd, src, size, target)
        out.append({"bytes": size, "direction": "upload", "seconds": time.monotonic() - t0, "ok": True,
                    "notes": notes(peaks(*pids), meter.per_gib(size))})
    except (ApiError, OSError, http.client.HTTPException) as e:
        execd.drop()  # the connection is in an unknown state after a failed upload
        out.append({"bytes": size, "direction": "upload", "ok": False, "error": str(e)[:200]})
        return out
    meter.start()
    t0 = time.monotonic()
    try:
        same, n = download(execd, target, src)
        ok = same and n == size
        out.append({"bytes": size, "direction": "download", "seconds": time.monotonic() - t0, "ok": True,
                    "check": "identical" if ok else f"MISMATCH ({n} bytes)",
                    "notes": notes(peaks(*pids), meter.per_gib(size))})
    except (ApiError, OSError, http.client.HTTPException) as e:
        execd.drop()
        out.append({"bytes": size, "direction": "download", "ok": False, "error": str(e)[:200]})
    try:  # not timed: leave nothing behind (the process provider's /tmp is the host's)
        execd.call("DELETE", "/files?path=" + urllib.parse.quote(target))
    except (ApiError, OSError, http.client.HTTPException):
        execd.drop()
    return out


def payloads(cfg, work):
    files = {}
    for mib in cfg["sizes"]:
        path = os.path.join(work, f"payload-{mib}M")
        make_file(path, mib * MIB)
        files[mib] = path
    return files


def command_output(execd, command):
    """stdout of a command run through execd (its stdout events joined), or None."""
    try:
        resp = execd.start("POST", "/command", {"command": command})
        out = []
        for raw in resp:
            line = raw.strip()
            if line.startswith(b"data:"):
                line = line[5:].strip()
            if line.startswith(b"{"):
                ev = json.loads(line)
                if ev.get("type") == "stdout":
                    out.append(ev.get("text", ""))
        return "".join(out).strip() if resp.status == 200 else None
    except (ApiError, OSError, ValueError, http.client.HTTPException):
        execd.drop()
        return None


def destination(execd, target_dir):
    """What the files are written to, as execd sees it: `DIR (FSTYPE)`."""
    fs = command_output(execd, f"findmnt -n -o FSTYPE -T {target_dir} 2>/dev/null | head -1 | grep . || "
                                f"stat -f -c %T {target_dir}")
    return f"{target_dir} ({fs or 'file system unknown'})"


def files_record(execd, rid, variant, cfg, work, files, pids, target_dir="/tmp", cpu_pids=None):
    values = []
    for mib in cfg["sizes"]:
        values += transfer(execd, files[mib], mib * MIB, pids, target_dir, cpu_pids or {})
    bad = all(not v["ok"] for v in values)
    dest = destination(execd, target_dir)
    record(work, {"section": "files", "id": rid, "tool": "sbx", "variant": variant,
                              "what": f"multipart upload then download, {variant}, to {dest}; the upload is "
                                      f"fsynced before it is answered; the download is compared byte for byte "
                                      f"with the uploaded file; endpoint {execd.base}", "kind": "throughput",
                              "destination": dest,
                              "status": "failed" if bad else "measured", "reason": "every transfer failed" if bad else "",
                              "values": values})


def section_files(lc, cfg, work, server_pid):
    before = set(execd_pids())
    sid = lc.create()
    wait_ping(lc.execd(sid))
    new = sorted(set(execd_pids()) - before)
    execd_pid = new[0] if len(new) == 1 else 0  # the sandbox's execd, when it can be told apart
    files = payloads(cfg, work)
    for rid, variant, proxy in (("files.direct", "execd direct", False), ("files.proxy", "via server proxy", True)):
        cpu = {"execd": execd_pid, "server": server_pid if proxy else 0}
        files_record(lc.execd(sid, proxy), rid, variant, cfg, work, files, (server_pid, 0), cpu_pids=cpu)
    for path in files.values():
        os.unlink(path)
    lc.delete(sid)


# ------------------------------------------------------------------ 7. API throughput
def parse_wrk(text):
    def num(pattern):
        m = re.search(pattern, text)
        return m.group(1) if m else None

    def ms(v):
        if v is None:
            return None
        m = re.match(r"([\d.]+)(us|ms|s)", v)
        scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]
        return round(float(m.group(1)) * scale, 3)

    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    return {"requests_per_s": num(r"Requests/sec:\s+([\d.]+)"),
            "p50_ms": ms(num(r"\s50%\s+(\S+)")), "p90_ms": ms(num(r"\s90%\s+(\S+)")),
            "p99_ms": ms(num(r"\s99%\s+(\S+)")), "non2xx": num(r"Non-2xx or 3xx responses: (\d+)") or "0",
            "errors": sum(int(x) for x in errors.groups()) if errors else 0}


def section_api(lc, cfg, work):
    if not shutil.which("wrk"):
        for rid, variant in (("api.get", "GET /v1/sandboxes/{id}"), ("api.list", "GET /v1/sandboxes")):
            skip(work, "api", rid, variant, "wrk", "wrk not installed")
        return
    sid = lc.create()
    for rid, variant, path in (("api.get", "GET /v1/sandboxes/{id}", f"/v1/sandboxes/{sid}"),
                               ("api.list", "GET /v1/sandboxes", "/v1/sandboxes")):
        cmd = ["wrk", "-t2", "-c16", f"-d{cfg['wrk_secs']}s", "--latency", "-H",
               f"OPEN-SANDBOX-API-KEY: {lc.key}", lc.url + path]
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        w = parse_wrk(res.stdout)
        w.update({"threads": 2, "connections": 16, "duration": f"{cfg['wrk_secs']}s", "raw": res.stdout[-2000:]})
        ok = res.returncode == 0 and w["requests_per_s"]
        record(work, {"section": "api", "id": rid, "tool": "sbx", "variant": variant,
                                  "what": "wrk -t2 -c16 --latency with the API key header; 1 sandbox exists",
                                  "command": " ".join(cmd[:-3] + ["-H", "'OPEN-SANDBOX-API-KEY: ...'", cmd[-1]]),
                                  "kind": "wrk", "status": "measured" if ok else "failed",
                                  "reason": "" if ok else res.stderr[-300:], "wrk": w})
    lc.delete(sid)


# ------------------------------------------------------------------ driver
def skip(work, section, rid, variant, what, reason, tool="sbx"):
    record(work, {"section": section, "id": rid, "tool": tool, "variant": variant, "what": what,
                              "command": "", "kind": "none", "status": "not_measured", "reason": reason})


def wanted(args, section):
    """--only: the sections to run (all when it is not given)."""
    only = getattr(args, "only", "")
    return not only or section in only.split(",")


def peer_skips(work, args=None):
    for section, rid, tool, variant, reason in PEER_SKIPS:
        if args is not None and not wanted(args, section):
            continue
        skip(work, section, rid, variant, "same measurement against the reference implementation", reason, tool)


def cmd_skip_all(args):
    for section, rid, variant, what in PLAN:
        if not wanted(args, section):
            continue
        skip(args.work, section, rid, variant, what, args.reason)
    peer_skips(args.work, args)
    return 0


def run_section(name, fn, work, ids, plan=None):
    """One failing section must not take the others down: record its error and go on."""
    try:
        fn()
    except (ApiError, OSError, KeyError, ValueError, http.client.HTTPException) as e:
        print(f"api.py: section {name} failed: {e}", file=sys.stderr)
        for section, rid, variant, what in plan or PLAN:
            if rid in ids:
                record(work, {"section": section, "id": rid + ".error", "tool": "sbx", "variant": variant,
                                          "what": what, "kind": "none", "status": "failed",
                                          "reason": f"section aborted: {str(e)[:300]}"})


EXECD_HOST = [("exec", "exec.host", "execd on the host (no sandbox, no server)"),
              ("files", "files.host", "execd on the host (no sandbox, no server), to disk"),
              ("files", "files.host.tmpfs", "execd on the host (no sandbox, no server), to tmpfs")]


def cmd_skip_execd(args):
    for section, rid, variant in EXECD_HOST:
        if not wanted(args, section):
            continue
        skip(args.work, section, rid, variant, "the same requests straight to a host sbx-execd", args.reason)
    return 0


def cmd_execd(args):
    """Exec round trip and file transfer against one sbx-execd started on the host by the driver."""
    cfg = CONFIG[args.mode]
    execd = Client(args.url)
    try:
        wait_ping(execd, 10)
    except (ApiError, OSError) as e:
        return cmd_skip_execd(argparse.Namespace(work=args.work, only=args.only,
                                                 reason=f"sbx-execd did not answer /ping: {e}"))
    if wanted(args, "exec"):
        exec_record(execd, "exec.host", EXECD_HOST[0][2], cfg, args.work)
    if not wanted(args, "files"):
        return 0
    files = payloads(cfg, args.work)
    # the bench's work dir (on /var/tmp: a disk file system), and /dev/shm (tmpfs: no disk, every
    # byte of the file stays in memory)
    for (_, rid, variant), parent in zip(EXECD_HOST[1:], (args.work, "/dev/shm")):
        target = tempfile.mkdtemp(prefix="sbx-bench-execd-", dir=parent)
        try:
            files_record(execd, rid, variant, cfg, args.work, files, (0, args.pid), target,
                         cpu_pids={"execd": args.pid})
        finally:
            shutil.rmtree(target, ignore_errors=True)
    for path in files.values():
        os.unlink(path)
    return 0


def cmd_run(args):
    cfg = CONFIG[args.mode]
    lc = Lifecycle(args.url, args.api_key, args.image, args.provider or None)
    w, pid = args.work, args.server_pid
    try:  # one create + delete first: learns the provider, and a server that cannot create at all
        lc.delete(lc.create())  # is one clear reason instead of a failure per section
    except (ApiError, OSError, KeyError, ValueError, http.client.HTTPException) as e:
        cmd_skip_all(argparse.Namespace(work=w, only=args.only,
                                        reason=f"the server cannot create a sandbox: {str(e)[:300]}"))
        return 0
    try:
        if wanted(args, "tti"):
            run_section("tti", lambda: section_tti(lc, cfg, w), w, {"tti.serial", "tti.par10", "tti.par50"})
            run_section("tti", lambda: section_target(lc, cfg, w, args, "warm"), w, {"tti.target"})
        if wanted(args, "exec"):
            run_section("exec", lambda: section_exec(lc, cfg, w), w, {"exec.direct", "exec.proxy"})
        if wanted(args, "pause"):
            run_section("pause", lambda: section_pause(lc, cfg, w), w, {"pause.pause", "pause.resume"})
        if wanted(args, "files"):
            run_section("files", lambda: section_files(lc, cfg, w, pid), w, {"files.direct", "files.proxy"})
        if wanted(args, "code"):
            run_section("code", lambda: section_code(lc, cfg, w), w,
                        {"code.cold", "code.warm", "code.warm.create"})
        if wanted(args, "snapshot"):
            run_section("snapshot", lambda: section_snapshot(lc, cfg, w), w,
                        {"snapshot.capture", "snapshot.ready", "snapshot.restore", "snapshot.create"})
        if wanted(args, "pool"):
            run_section("pool", lambda: section_pool(lc, cfg, w), w,
                        {"pool.exec", "pool.pooled", "pool.unpooled"})
        if wanted(args, "api"):
            run_section("api", lambda: section_api(lc, cfg, w), w, {"api.get", "api.list"})
        if wanted(args, "density"):
            run_section("density", lambda: section_density(lc, cfg, w, pid), w, {"density.idle"})
    finally:
        lc.cleanup()
    peer_skips(w, args)
    return 0


def cmd_target(args):
    """The target against a second server the driver started (--variant cold), or, with --reason,
    that measurement recorded as not measured."""
    cfg = CONFIG[args.mode]
    rid, variant = TARGET[args.variant]
    plan = [("tti", rid, variant, "issue target: API create -> first result -> delete p50 <= 2x `sbx run` p50")]
    if args.reason:
        skip(args.work, "tti", rid, variant, plan[0][3], args.reason)
        return 0
    lc = Lifecycle(args.url, args.api_key, args.image, args.provider or None)
    try:
        try:  # as in cmd_run: one create + delete first (and the provider's name)
            lc.delete(lc.create())
        except (ApiError, OSError, KeyError, ValueError, http.client.HTTPException) as e:
            skip(args.work, "tti", rid, variant, plan[0][3], f"the server cannot create a sandbox: {str(e)[:300]}")
            return 0
        run_section("tti", lambda: section_target(lc, cfg, args.work, args, args.variant), args.work, {rid}, plan)
    finally:
        lc.cleanup()
    return 0


def cmd_delete_all(args):
    """Delete every sandbox a server lists (a server the driver started for the bench alone)."""
    api = Client(args.url.rstrip("/") + "/v1", {"OPEN-SANDBOX-API-KEY": args.api_key})
    ids, page, more = [], 1, True
    try:
        while more:
            listed = api.call("GET", f"/sandboxes?page={page}&pageSize=200")
            ids += [sb["id"] for sb in listed.get("items", [])]
            more, page = listed.get("pagination", {}).get("hasNextPage", False), page + 1
    except (ApiError, OSError, KeyError, ValueError, AttributeError, http.client.HTTPException) as e:
        print(f"api.py: could not list sandboxes: {e}", file=sys.stderr)
    for sid in ids:
        try:
            api.call("DELETE", f"/sandboxes/{sid}", expect=(200, 202, 204, 404))
        except (ApiError, OSError, http.client.HTTPException) as e:
            print(f"api.py: could not delete sandbox {sid}: {e}", file=sys.stderr)
    return 0


def add_target_args(p):
    p.add_argument("--sbx", default="", help="the sbx binary whose `sbx run` is the target's reference")
    p.add_argument("--hyperfine", default=shutil.which("hyperfine") or "")
    p.add_argument("--net", default="bridge", help="the native provider's network mode of the server")


def main(argv):
    ap = argparse.ArgumentParser(prog="api.py")
    sub = ap.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("run")
    p.add_argument("--work", required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--api-key", default="")
    p.add_argument("--mode", choices=sorted(CONFIG), default="full")
    p.add_argument("--image", required=True)
    p.add_argument("--server-pid", type=int, default=0)
    p.add_argument("--provider", default="", help="extensions.provider of every create (default: the server's)")
    p.add_argument("--only", default="", help="comma-separated sections to run (default: all)")
    add_target_args(p)
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("target")
    p.add_argument("--variant", choices=sorted(TARGET), required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--reason", default="", help="record it as not measured, with this reason")
    p.add_argument("--url", default="")
    p.add_argument("--api-key", default="")
    p.add_argument("--mode", choices=sorted(CONFIG), default="full")
    p.add_argument("--image", default="host")
    p.add_argument("--provider", default="")
    add_target_args(p)
    p.set_defaults(fn=cmd_target)
    p = sub.add_parser("delete-all")
    p.add_argument("--url", required=True)
    p.add_argument("--api-key", default="")
    p.set_defaults(fn=cmd_delete_all)
    p = sub.add_parser("execd")
    p.add_argument("--work", required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--mode", choices=sorted(CONFIG), default="full")
    p.add_argument("--pid", type=int, default=0)
    p.add_argument("--only", default="", help="comma-separated sections to run (default: all)")
    p.set_defaults(fn=cmd_execd)
    p = sub.add_parser("skip-execd")
    p.add_argument("--work", required=True)
    p.add_argument("--reason", required=True)
    p.add_argument("--only", default="", help="comma-separated sections (default: all)")
    p.set_defaults(fn=cmd_skip_execd)
    p = sub.add_parser("skip-all")
    p.add_argument("--work", required=True)
    p.add_argument("--reason", required=True)
    p.add_argument("--only", default="", help="comma-separated sections (default: all)")
    p.set_defaults(fn=cmd_skip_all)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
