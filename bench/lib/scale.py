#!/usr/bin/env python3
"""Scale: cost of create, exec, list and delete through the API as the number of live idle
sandboxes grows (bench section `scale`; docs/benchmarks.md).

  scale.py --work DIR --url URL --key KEY --steps 100,1000,... [--samples N] [--provider P]
           [--server-pid PID] [--time-box S] [--tool NAME] [--id ID] [--raw FILE]

At each step the sandboxes are filled up to the step's count (--fill-clients creates at once,
each until GET says Running), then, with that many idle sandboxes standing, N samples of each
operation are taken one at a time:
  create  POST /v1/sandboxes until GET reports Running (the extra sandboxes are the delete samples)
  exec    POST /command `echo` through the server's proxy route, a random live sandbox each time
  list    GET /v1/sandboxes (the default page of 20, all sandboxes matching)
  delete  DELETE /v1/sandboxes/{id} of each create sample right after it, until 204
and the server's RSS and the host's MemAvailable drop are read. A step that cannot be filled (a
create fails) ends the run with the error as the reason; so does the time box. Everything the
run created is deleted at the end. Python 3 stdlib only.
"""

import argparse
import concurrent.futures
import json
import os
import random
import sys
import threading
import time

import api
import bench
import stats

OPS = ("create", "exec", "list", "delete")


def cpu_snapshot():
    """(busy, total) jiffies of all CPUs (/proc/stat) and {pid: (comm, jiffies)} of every
    process."""
    with open("/proc/stat", encoding="utf-8") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    procs = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", encoding="utf-8") as f:
                st = f.read()
        except OSError:
            continue  # gone meanwhile
        comm = st[st.index("(") + 1:st.rindex(")")]
        rest = st[st.rindex(")") + 2:].split()
        procs[int(d)] = (comm, int(rest[11]) + int(rest[12]))  # utime + stime
    busy = sum(v) - v[3] - v[4]  # all but idle and iowait
    return busy, sum(v), procs


class Scale:
    def __init__(self, args):
        self.args = args
        self.hdr = {"OPEN-SANDBOX-API-KEY": args.key}
        self.url = args.url.rstrip("/")
        self.local = threading.local()
        self.live = []
        self.lock = threading.Lock()
        self.tag = f"sbx-bench-scale-{os.getpid()}"

    def client(self):
        c = getattr(self.local, "c", None)
        if c is None:
            c = api.Client(self.url, self.hdr)
            self.local.c = c
        return c

    def body(self):
        b = {"image": {"uri": self.args.image}, "entrypoint": ["sleep", "2000000"],
             "timeout": self.args.sandbox_timeout,
             "resourceLimits": {"cpu": "1", "memory": "128Mi"},
             "metadata": {"sbx-bench": self.tag}}
        if self.args.provider:
            b["extensions"] = {"provider": self.args.provider}
        return b

    def create(self):
        """POST, then GET until Running; (sid, seconds). Raises api.ApiError with the server's
        error (a limit's {code, message}) when it fails."""
        c = self.client()
        t0 = time.monotonic()
        resp = c.start("POST", "/v1/sandboxes", self.body())
        data = resp.read()
        if resp.status not in (200, 201, 202):
            try:  # the server's {code, message} in full: it names the limit that was hit
                e = json.loads(data)
                raise api.ApiError(f"POST /v1/sandboxes: HTTP {resp.status} {e['code']}: {e['message']}")
            except (ValueError, KeyError, TypeError):
                raise api.ApiError(f"POST /v1/sandboxes: HTTP {resp.status} {data[:300]!r}") from None
        sid = json.loads(data)["id"]
        with self.lock:
            self.live.append(sid)
        while True:
            st = c.call("GET", f"/v1/sandboxes/{sid}")["status"]
            if st["state"] == "Running":
                return sid, time.monotonic() - t0
            if st["state"] in ("Failed", "Terminated"):
                raise api.ApiError(f"sandbox {sid} {st['state']}: {st.get('reason')}: {st.get('message')}")
            if time.monotonic() - t0 > 120:
                raise api.ApiError(f"sandbox {sid} not Running after 120 s ({st['state']})")
            time.sleep(0.002)

    def delete(self, sid):
        t0 = time.monotonic()
        self.client().call("DELETE", f"/v1/sandboxes/{sid}", expect=(200, 202, 204))
        dt = time.monotonic() - t0
        with self.lock:
            self.live.remove(sid)
        return dt

    def exec_echo(self, sid):
        c = self.client()
        t0 = time.monotonic()
        resp = c.start("POST", f"/sandboxes/{sid}/proxy/44772/command", {"command": "echo scale"})
        data = resp.read()
        dt = time.monotonic() - t0
        if resp.status != 200 or b"execution_complete" not in data or b"scale" not in data:
            raise api.ApiError(f"exec in {sid}: HTTP {resp.status} {data[:200]!r}")
        return dt

    def list_page(self):
        t0 = time.monotonic()
        r = self.client().call("GET", "/v1/sandboxes")
        dt = time.monotonic() - t0
        return dt, r.get("pagination", {}).get("totalItems")

    def fill(self, target, deadline):
        need = target - len(self.live)
        if need <= 0:
            return 0.0, None
        t0 = time.monotonic()
        err = [None]
        stop = threading.Event()

        def one(_):
            if stop.is_set() or time.monotonic() > deadline:
                return
            try:
                self.create()
            except (api.ApiError, OSError) as e:
                err[0] = err[0] or str(e)
                stop.set()

        with concurrent.futures.ThreadPoolExecutor(self.args.fill_clients) as pool:
            list(pool.map(one, range(need)))
        if err[0] is None and len(self.live) < target:
            err[0] = f"time box of {self.args.time_box} s reached while filling to {target}"
        return time.monotonic() - t0, err[0]

    def rss(self):
        if not self.args.server_pid:
            return None
        try:
            with open(f"/proc/{self.args.server_pid}/status", encoding="utf-8") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def cgroup_bytes(self):
        """Memory charged to the sandboxes' parent cgroup (cgroup v1 memory controller or v2),
        or None."""
        parent = self.args.cgroup_parent
        if not parent:
            return None
        bases = [""]
        try:  # the provider nests it under the server's own memory cgroup
            with open(f"/proc/{self.args.server_pid}/cgroup", encoding="utf-8") as f:
                for line in f:
                    _, ctrl, path = line.rstrip("\n").split(":", 2)
                    if "memory" in ctrl.split(",") or ctrl == "":
                        bases.insert(0, path.strip("/"))
        except (OSError, ValueError):
            pass
        paths = []
        for b in bases:
            rel = f"{b}/{parent}".strip("/")
            paths += [f"/sys/fs/cgroup/memory/{rel}/memory.usage_in_bytes",
                      f"/sys/fs/cgroup/{rel}/memory.current"]
        for path in paths:
            try:
                with open(path, encoding="utf-8") as f:
                    return int(f.read().strip())
            except (OSError, ValueError):
                continue
        return None

    def idle_load(self, seconds):
        """With only idle sandboxes standing: the share of all the host's CPUs that was busy
        over `seconds`, and the processes (kernel threads included) that used most of it. A
        step's latencies mean little when something else on the machine takes the CPUs as
        the count grows (e.g. an agent that walks every process)."""
        b0, t0, p0 = cpu_snapshot()
        time.sleep(seconds)
        b1, t1, p1 = cpu_snapshot()
        if t1 <= t0:
            return None, []
        top = []
        for pid, (comm, j) in p1.items():
            if pid in p0 and pid != os.getpid():
                top.append((j - p0[pid][1], pid, comm))
        top.sort(reverse=True)
        tot = t1 - t0
        return (b1 - b0) / tot, [{"pid": pid, "comm": comm, "share": d / tot}
                                 for d, pid, comm in top[:3] if d > 0]

    def measure(self, n_live):
        s = self.args.samples
        out = {op: [] for op in OPS}
        # each create sample is deleted again at once (the delete sample): the count stays at
        # n_live (+1), so a step right under a limit is measured, not pushed over it
        for _ in range(s):
            sid, dt = self.create()
            out["create"].append(dt)
            out["delete"].append(self.delete(sid))
        pool = list(self.live)
        for _ in range(s):
            out["exec"].append(self.exec_echo(random.choice(pool)))
        total = None
        for _ in range(s):
            dt, total = self.list_page()
            out["list"].append(dt)
        return out, total

    def cleanup(self):
        ids = list(self.live)

        def one(sid):
            try:
                self.delete(sid)
            except (api.ApiError, OSError) as e:
                print(f"scale.py: could not delete {sid}: {e}", file=sys.stderr)

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(one, ids))

    def run(self):
        a = self.args
        start = time.monotonic()
        deadline = start + a.time_box
        base_avail = api.mem_available()
        base_rss = self.rss()
        points, stop_reason = [], None
        try:
            for target in a.steps:
                fill_s, err = self.fill(target, deadline)
                if err:
                    stop_reason = f"at {len(self.live)} live sandboxes, filling to {target}: {err}"
                    break
                if time.monotonic() > deadline:
                    stop_reason = f"time box of {a.time_box} s reached before measuring {target}"
                    break
                busy, top = self.idle_load(a.settle)
                try:
                    ops, total = self.measure(target)
                except (api.ApiError, OSError) as e:
                    stop_reason = f"at {len(self.live)} live sandboxes, measuring step {target}: {e}"
                    break
                rss = self.rss()
                cg = self.cgroup_bytes()
                drop = base_avail - api.mem_available()
                pt = {"n": target, "fill_seconds": round(fill_s, 3), "listed_total": total,
                      "server_rss": rss, "memavailable_drop": drop,
                      "elapsed_s": round(time.monotonic() - start, 1)}
                for op, xs in ops.items():
                    pt[op] = {"p50": stats.percentile(xs, 50), "p99": stats.percentile(xs, 99),
                              "samples": [round(x, 6) for x in xs]}
                if rss is not None and base_rss is not None:
                    pt["server_rss_per_sandbox"] = (rss - base_rss) / target
                pt["host_mem_per_sandbox"] = drop / target
                if busy is not None:
                    pt["idle_cpu_busy"] = busy
                    pt["idle_cpu_top"] = top
                if cg is not None:
                    pt["cgroup_bytes"] = cg
                    pt["cgroup_per_sandbox"] = cg / target
                points.append(pt)
                line = f"[scale] {a.tool}: n={target} " + " ".join(
                    f"{op} p50={pt[op]['p50'] * 1000:.1f}ms p99={pt[op]['p99'] * 1000:.1f}ms" for op in OPS)
                line += f" rss={(rss or 0) >> 20}MiB host/sb={drop / target / 1048576:.2f}MiB"
                if cg is not None:
                    line += f" cg/sb={cg / target / 1048576:.2f}MiB"
                if busy is not None:
                    line += f" idle-cpu={busy * 100:.0f}% ({idle_top(top)})"
                print(line + f" fill={fill_s:.0f}s", file=sys.stderr, flush=True)
        finally:
            t0 = time.monotonic()
            left = len(self.live)
            self.cleanup()
            cleanup_s = time.monotonic() - t0
        return points, stop_reason, left, cleanup_s, base_rss


def idle_top(top):
    """`comm` pid share% of the busiest processes."""
    return ", ".join(f"{t['comm']} {t['pid']} {t['share'] * 100:.0f}%" for t in top) or "none"


def record(args, points, stop_reason, left, cleanup_s, base_rss):
    reached = points[-1]["n"] if points else 0
    facts = {"steps asked": ", ".join(str(x) for x in args.steps),
             "largest count measured": str(reached),
             "stopped": stop_reason or "no: every step measured"}
    if points:
        first, last = points[0], points[-1]
        for op in OPS:
            ratio = last[op]["p50"] / first[op]["p50"] if first[op]["p50"] else 0
            facts[f"{op} p50 at {first['n']} / at {last['n']}"] = (
                f"{stats.fmt_ms(first[op]['p50'])} / {stats.fmt_ms(last[op]['p50'])} ms ({ratio:.2f}\u00d7)")
        if last.get("server_rss_per_sandbox") is not None:
            facts[f"server RSS per sandbox at {last['n']}"] = stats.fmt_bytes(last["server_rss_per_sandbox"])
        if last.get("cgroup_per_sandbox") is not None:
            facts[f"memory charged to the sandboxes' cgroups per sandbox at {last['n']}"] = (
                stats.fmt_bytes(last["cgroup_per_sandbox"]))
        facts[f"host MemAvailable drop per sandbox at {last['n']} (shared host: an upper bound)"] = (
            stats.fmt_bytes(last["host_mem_per_sandbox"]))
        if first.get("idle_cpu_busy") is not None and last.get("idle_cpu_busy") is not None:
            facts["host CPUs busy with only idle sandboxes standing, at "
                  f"{first['n']} / at {last['n']}"] = (
                f"{first['idle_cpu_busy'] * 100:.0f} % / {last['idle_cpu_busy'] * 100:.0f} % of all CPUs "
                f"(busiest at {last['n']}: {idle_top(last.get('idle_cpu_top', []))})")
    facts[f"deleting the {left} left at the end ({min(8, max(left, 1))} clients)"] = f"{cleanup_s:.1f} s"
    return {
        "section": "scale", "id": args.id, "tool": args.tool, "variant": args.variant,
        "what": "idle sandboxes created through the API in steps; at each step create (until Running), "
                "exec `echo` (server proxy route), list (default page) and delete (until 204) sampled one "
                f"at a time, {args.samples} samples each",
        "kind": "scale", "status": "measured" if points else "failed",
        "reason": stop_reason or "", "provider": args.provider or None,
        "points": points, "server_rss_base": base_rss, "facts": facts,
    }


def main(argv):
    ap = argparse.ArgumentParser(prog="scale.py")
    ap.add_argument("--work")
    ap.add_argument("--url", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--steps", required=True, type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--fill-clients", type=int, default=4)
    ap.add_argument("--provider", default="")
    ap.add_argument("--image", default="host")
    ap.add_argument("--server-pid", type=int, default=0)
    ap.add_argument("--cgroup-parent", default="", help="the sandboxes' parent cgroup (memory)")
    ap.add_argument("--time-box", type=float, default=3600)
    ap.add_argument("--settle", type=float, default=3.0)
    ap.add_argument("--sandbox-timeout", type=int, default=7200)
    ap.add_argument("--tool", default="sbx")
    ap.add_argument("--variant", default="native")
    ap.add_argument("--id", default="scale.sbx")
    ap.add_argument("--raw", help="also write the record to this file")
    args = ap.parse_args(argv)
    s = Scale(args)
    try:
        rec = record(args, *s.run())
    except Exception as e:  # pylint: disable=broad-except
        # a measurement that broke (e.g. a create that failed mid-sample) is a failed record
        # with the error, not a missing row
        rec = record(args, [], f"{type(e).__name__}: {e}", 0, 0.0, None)
        rec["status"] = "failed"
    if args.work:
        bench.write_record(args.work, rec)
    if args.raw:
        with open(args.raw, "w", encoding="utf-8") as f:
            json.dump(rec, f, indent=1)
    return 0 if rec["status"] == "measured" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
