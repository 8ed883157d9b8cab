#!/usr/bin/env python3
"""Section 4 without a server: how much memory an idle `sbx run` sandbox costs, and how many fit.

  density.py --work W --sbx BIN --rootfs DIR --cap N

Starts `sbx run --network none --memory 256m --rootfs DIR -- /bin/sleep 86400` N times in the
background, one after another, until the cap or the first failure (the memory limit gives each
sandbox a memory cgroup, as an API create with resourceLimits would). After each start it waits
until `sleep` runs below the supervisor, then accounts memory as:
  sandbox memory cgroup usage (v1 memory.usage_in_bytes / v2 memory.current: everything charged
  inside the sandbox, kernel memory included on v1; the PSS of the sandbox's processes if it has
  no memory cgroup of its own)  +  PSS of the `sbx run` supervisor (outside the sandbox's cgroup).
Host MemAvailable is recorded too (noisy on a shared host). Every supervisor is stopped by PID
(SIGTERM, then SIGKILL) at the end, and the time to stop them all is reported.
"""

import argparse
import os
import signal
import subprocess
import sys
import time

import api
import bench
import stats


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="utf-8") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        for c in children(todo.pop()):
            out.append(c)
            todo.append(c)
    return out


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return ""


def wait_running(sup, deadline_s=10):
    """The sandbox's first process (the supervisor's child) once `sleep` runs below it, else None."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if sup.poll() is not None:
            return None
        kids = children(sup.pid)
        if kids and any(comm(d) == "sleep" for d in descendants(sup.pid)):
            return kids[0]
        time.sleep(0.002)
    return None


def account(sups):
    """Sandbox memory cgroup usage when the sandbox has its own memory cgroup, else the PSS of
    its processes; plus the supervisor's PSS either way."""
    total, known = 0, 0
    for sup, inner in sups:
        own = api.memory_cgroup_path(sup.pid)
        cg = api.cgroup_memory(inner) if api.memory_cgroup_path(inner) not in (None, own) else None
        if cg is not None:
            known += 1
            total += cg
        else:
            total += sum(api.pss(p) for p in [inner] + descendants(inner))
        total += api.pss(sup.pid)
    return total, known


def stop_all(sups):
    t0 = time.monotonic()
    for sup, _ in sups:
        if sup.poll() is None:
            sup.send_signal(signal.SIGTERM)
    for sup, _ in sups:
        try:
            sup.wait(timeout=20)
        except subprocess.TimeoutExpired:
            sup.kill()
            sup.wait()
    return time.monotonic() - t0


def start_one(args, n):
    cmd = [args.sbx, "run", "--network", "none", "--memory", "256m", "--rootfs", args.rootfs, "--", "/bin/sleep", "86400"]
    log = open(os.path.join(args.work, f"density-{n}.log"), "wb")  # pylint: disable=consider-using-with
    sup = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log)  # pylint: disable=consider-using-with
    log.close()
    inner = wait_running(sup)
    return sup, inner, " ".join(cmd)


def run(args):
    base_avail = api.mem_available()
    sups, points, first_failure, cmdline = [], [], None, ""
    t_start = []
    try:
        for n in range(1, args.cap + 1):
            t0 = time.monotonic()
            sup, inner, cmdline = start_one(args, n)
            if inner is None:
                with open(os.path.join(args.work, f"density-{n}.log"), encoding="utf-8", errors="replace") as f:
                    first_failure = f"sandbox #{n}: not running after 10 s; {f.read()[:200].strip()}"
                sups.append((sup, sup.pid))
                break
            t_start.append(time.monotonic() - t0)
            sups.append((sup, inner))
            total, known = account(sups)
            points.append([n, total, known, base_avail - api.mem_available()])
    finally:
        stop_secs = stop_all(sups)
    created = len(points)
    slope = stats.linear_slope([(p[0], p[1]) for p in points])
    facts = {
        "idle sandboxes running at once": f"{created} (cap {args.cap})",
        "first failure": first_failure or "none before the cap",
        "memory per idle sandbox (slope: sandbox cgroup usage + supervisor PSS)": stats.fmt_bytes(slope),
        "total accounted at the end": stats.fmt_bytes(points[-1][1]) if points else "-",
        "sandboxes with a memory cgroup of their own (the others count by PSS)": f"{points[-1][2]} of {created}" if points else "-",
        "host MemAvailable drop at the end (noisy on a shared host)": stats.fmt_bytes(points[-1][3]) if points else "-",
        "MemAvailable drop per sandbox (slope; upper bound: kernel memory no cgroup is charged for, "
        "plus whatever else ran on the host)": stats.fmt_bytes(stats.linear_slope([(p[0], p[3]) for p in points])),
        "start time of each (until its command runs), p50 / max": (
            f"{stats.fmt_ms(stats.percentile(t_start, 50))} / {stats.fmt_ms(max(t_start))} ms" if t_start else "-"),
        f"stopping all {len(sups)} (SIGTERM to each supervisor, wait)": f"{stop_secs:.2f} s",
    }
    rec = {
        "section": "density", "id": "density.run", "tool": "sbx run", "variant": "idle sandboxes (no server)",
        "what": "idle `sbx run --memory 256m` sandboxes (busybox sleep) started one by one and left running; "
                "memory = the sandbox's memory-cgroup usage (PSS of its processes if it has no memory cgroup "
                "of its own) + PSS of its `sbx run` supervisor",
        "command": cmdline, "kind": "curve", "status": "measured" if points else "failed",
        "reason": first_failure or "", "points": [[p[0], p[1]] for p in points], "slope_bytes": slope,
        "points_alt": [[p[0], p[3]] for p in points], "alt_title": "host MemAvailable drop",
        "samples_detail": [{"n": p[0], "accounted": p[1], "cgroups_found": p[2], "memavailable_drop": p[3]}
                           for p in points],
        "start_seconds": t_start, "facts": facts,
        "curve_title": "memory of idle sandboxes (cgroup usage + supervisor PSS)",
        "y_label": "MiB accounted", "x_label": "idle sbx run sandboxes",
    }
    bench.write_record(args.work, rec)
    return 0


def main(argv):
    ap = argparse.ArgumentParser(prog="density.py")
    ap.add_argument("--work", required=True)
    ap.add_argument("--sbx", required=True)
    ap.add_argument("--rootfs", required=True)
    ap.add_argument("--cap", type=int, required=True)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
