#!/usr/bin/env python3
"""Record keeping for bench/run (Python 3 stdlib only).

Every measurement, and every measurement that could not be made, becomes one JSON record in
WORK/records/. `render` turns the records into the result files:
  machine   describe the machine (CPU, cores, memory, kernel, cgroup mode, tool versions)
  hyperfine convert a hyperfine --export-json result (+ its separate warm-up run) to a record
  skip      record a measurement that was not made, with the reason
  render    write <stem>.json, <stem>.md and the plots (see render.py)
"""

import argparse
import json
import os
import platform
import re
import socket
import subprocess
import sys
import time

import stats

TOOL_VERSION_CMDS = {
    "hyperfine": ["hyperfine", "--version"],
    "bwrap": ["bwrap", "--version"],
    "crun": ["crun", "--version"],
    "runc": ["runc", "--version"],
    "dockerd": ["dockerd", "--version"],
    "containerd": ["containerd", "--version"],
    "wrk": ["wrk", "--version"],
    "gnuplot": ["gnuplot", "--version"],
    "busybox": ["busybox"],
    "python3": [sys.executable, "--version"],
}


def first_line(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else None


def read_kv(path, sep=":"):
    out = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if sep in line:
                    k, v = line.split(sep, 1)
                    out.setdefault(k.strip(), v.strip())
    except OSError:
        pass
    return out


def cgroup_mode():
    """'v2', 'hybrid (v1 + cgroup2 at /sys/fs/cgroup/unified)' or 'v1', from the mount table."""
    fstypes = {}
    with open("/proc/self/mounts", encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3:
                fstypes[parts[1]] = parts[2]
    if fstypes.get("/sys/fs/cgroup") == "cgroup2":
        return "v2"
    if fstypes.get("/sys/fs/cgroup/unified") == "cgroup2":
        return "hybrid (v1 + cgroup2 at /sys/fs/cgroup/unified)"
    return "v1"


def cgroup2_controllers():
    for path in ("/sys/fs/cgroup/cgroup.controllers", "/sys/fs/cgroup/unified/cgroup.controllers"):
        try:
            with open(path, encoding="utf-8") as f:
                return f.read().split()
        except OSError:
            continue
    return None


def cmd_machine(args):
    cpu = read_kv("/proc/cpuinfo")
    mem = read_kv("/proc/meminfo")
    osr = read_kv("/etc/os-release", "=")
    extra = dict(kv.split("=", 1) for kv in args.tool or [])
    versions = {name: first_line(cmd) for name, cmd in TOOL_VERSION_CMDS.items()}
    versions.update(extra)
    with open("/proc/loadavg", encoding="utf-8") as f:
        load = f.read().split()[:3]
    desc = {
        "host": socket.gethostname(),
        "cpu_model": cpu.get("model name"),
        "cpu_flags_virt": sorted({"vmx", "svm", "hypervisor"} & set(cpu.get("flags", "").split())),
        "cores": os.cpu_count(),
        "mem_total_kib": int(mem.get("MemTotal", "0 kB").split()[0]),
        "swap_total_kib": int(mem.get("SwapTotal", "0 kB").split()[0]),
        "kernel": platform.release(),
        "os": osr.get("PRETTY_NAME", "").strip('"'),
        "cgroup_mode": cgroup_mode(),
        "cgroup2_controllers": cgroup2_controllers(),
        "loadavg_at_start": load,
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tool_versions": versions,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(desc, f, indent=1)
    return 0


def base_record(args):
    return {
        "section": args.section,
        "id": args.id,
        "tool": args.tool,
        "variant": args.variant,
        "what": args.what,
        "command": args.command,
    }


def write_record(workdir, rec):
    recdir = os.path.join(workdir, "records")
    os.makedirs(recdir, exist_ok=True)
    seq = len(os.listdir(recdir))
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", rec["id"])
    with open(os.path.join(recdir, f"{seq:03d}-{name}.json"), "w", encoding="utf-8") as f:
        json.dump(rec, f, indent=1)


def load_hyperfine(path, cpu=None):
    """Per-run wall times and exit codes; with cpu=[], appends (runs, mean user+system seconds)."""
    with open(path, encoding="utf-8") as f:
        res = json.load(f)["results"][0]
    times = res.get("times") or []
    codes = res.get("exit_codes") or [0] * len(times)
    if cpu is not None:
        cpu.append((len(times), (res.get("user") or 0) + (res.get("system") or 0)))
    return times, codes


def cmd_hyperfine(args):
    rec = base_record(args)
    rec.update({"kind": "latency", "unit": "s", "status": "measured", "timer": "hyperfine -N"})
    rec["samples"], rec["exit_codes"] = [], []
    cpu = []
    for path in args.json:  # one file per round, in run order
        t, c = load_hyperfine(path, cpu)
        rec["samples"] += t
        rec["exit_codes"] += c
    rec["rounds"] = args.rounds
    runs = sum(n for n, _ in cpu)
    # hyperfine's rusage of the spawned command: its whole reaped process tree, not daemons it
    # talks to (dockerd/containerd work is not in docker's figure).
    rec["cpu_mean_s"] = sum(n * m for n, m in cpu) / runs if runs else None
    if args.warmup_json:
        wt, wc = load_hyperfine(args.warmup_json)
        rec["warmup"] = {"samples": wt, "exit_codes": wc}
    summary = stats.summarize(rec["samples"], rec["exit_codes"])
    if summary["ok"] == 0:
        rec["status"] = "failed"
        rec["reason"] = args.fail_reason or "every run exited non-zero"
    write_record(args.work, rec)
    return 0


def cmd_skip(args):
    rec = base_record(args)
    rec.update({"kind": "none", "status": "not_measured", "reason": args.reason})
    write_record(args.work, rec)
    return 0


def cmd_kwalk(args):
    """A record of sbx-kwalk's output: the kernel's walks per create against the count."""
    rec = base_record(args)
    try:
        with open(args.json, encoding="utf-8") as f:
            points = json.load(f)["points"]
    except (OSError, ValueError, KeyError) as e:
        points, err = [], str(e)
    else:
        err = None if points else "no step was measured"
    rec.update({"kind": "kwalk", "unit": "s", "points": points,
                "status": "measured" if points else "failed"})
    if err or args.fail_reason:
        rec["reason"] = "; ".join(x for x in (args.fail_reason, err) if x)
    write_record(args.work, rec)
    return 0


def cmd_all_failed(args):
    """Exit 0 when every run in a hyperfine result failed (so the driver can probe why)."""
    codes = [c for path in args.json for c in load_hyperfine(path)[1]]
    return 0 if codes and all(c != 0 for c in codes) else 1


def cmd_render(args):
    import render  # pylint: disable=import-outside-toplevel

    return render.main(args)


def add_record_args(p):
    p.add_argument("--work", required=True)
    p.add_argument("--section", required=True)
    p.add_argument("--id", required=True)
    p.add_argument("--tool", required=True)
    p.add_argument("--variant", default="")
    p.add_argument("--what", required=True)
    p.add_argument("--command", default="")


def main(argv):
    ap = argparse.ArgumentParser(prog="bench.py")
    sub = ap.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("machine")
    p.add_argument("--out", required=True)
    p.add_argument("--tool", action="append", help="NAME=VERSION for tools found by the driver")
    p.set_defaults(fn=cmd_machine)
    p = sub.add_parser("hyperfine")
    add_record_args(p)
    p.add_argument("--json", action="append", required=True, help="once per round")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--warmup-json")
    p.add_argument("--fail-reason")
    p.set_defaults(fn=cmd_hyperfine)
    p = sub.add_parser("skip")
    add_record_args(p)
    p.add_argument("--reason", required=True)
    p.set_defaults(fn=cmd_skip)
    p = sub.add_parser("kwalk")
    add_record_args(p)
    p.add_argument("--json", required=True, help="sbx-kwalk's output")
    p.add_argument("--fail-reason", help="why the run ended early (its exit status)")
    p.set_defaults(fn=cmd_kwalk)
    p = sub.add_parser("all-failed")
    p.add_argument("--json", action="append", required=True)
    p.set_defaults(fn=cmd_all_failed)
    p = sub.add_parser("render")
    p.add_argument("--work", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--stem", required=True)
    p.add_argument("--mode", required=True)
    p.add_argument("--published", required=True)
    p.add_argument("--notes", action="append", default=[])
    p.set_defaults(fn=cmd_render)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
