"""Turn WORK/records/*.json into <stem>.json, <stem>.md and gnuplot SVG plots."""

import glob
import json
import os
import re
import shutil
import subprocess

import stats

SECTIONS = [
    (
        "start",
        "1. Sandbox start",
        "Wall time from spawning the tool's CLI to its exit, for a sandbox that runs `/bin/true` "
        "from the same trivial rootfs (a static busybox) and is torn down again: "
        "create + start + run + wait + delete, one sandbox at a time. Timed by hyperfine "
        "(`-N`, no shell); every run's time is kept in the JSON.",
    ),
    (
        "tti",
        "2. Time to interactive through the API",
        "Client-side wall time of POST /v1/sandboxes (202) -> execd endpoint lookup -> first "
        "`POST /command` (`true`) completes -> DELETE (204), serial and with N clients in "
        "parallel. 'create->first result' excludes the delete. Docker rows: the same steps through "
        "the Docker Engine API (create, start, exec `/bin/true`, remove), which is what OpenSandbox's "
        "Docker runtime does underneath. 'Issue target' rows: the same cycle, delete included, taking "
        "turns round by round with `sbx run -- /bin/true` of the same image and network mode; the "
        "target is an API p50 of at most 2\u00d7 the `sbx run` p50.",
    ),
    (
        "exec",
        "3. Exec round trip",
        "`POST /command {\"command\":\"true\"}` on a running sandbox until the terminal SSE event, "
        "over a kept-alive or a new connection: directly to execd's endpoint, via the server's proxy "
        "route, and to an sbx-execd alone on the host. Docker row: `docker exec` of `/bin/true` through "
        "the Engine API; its ratio is to sbx's execd endpoint over a kept-alive connection (the SDK path).",
    ),
    (
        "density",
        "4. Density",
        "Idle sandboxes started one after another and left running, up to a cap: memory per idle "
        "sandbox (slope of the accounted memory over the count) and the count at the first failure, "
        "if any before the cap. Without the server: `sbx run` sandboxes (sandbox memory cgroup + "
        "supervisor PSS); through the API: sandboxes created with POST (sandbox cgroups + server "
        "RSS growth).",
    ),
    (
        "pause",
        "5. Pause / resume",
        "POST /pause (or /resume) until GET reports the target state (Paused / Running). Docker rows: "
        "POST /containers/{id}/pause (unpause) until inspect agrees (the cgroup freezer, as OpenSandbox's "
        "Docker runtime pauses).",
    ),
    (
        "files",
        "6. File transfer",
        "Upload (multipart `POST /files/upload`) and download (`GET /files/download`) through "
        "execd; the upload is fsynced before it is answered, the download is compared byte for byte with "
        "the uploaded file; throughput, the server's/execd's peak RSS (VmHWM) and CPU seconds per GiB "
        "(execd, server, the bench's client) from /proc.",
    ),
    (
        "code",
        "10. Code interpreting: the first Python result",
        "`POST /code` (the default Python context, `1+1`) through the server's proxy until its "
        "terminal event, on a sandbox created 2 s before: with the kernel started by that first "
        "run (cold), and with `SBX_WARM_KERNEL=python` (a kernel execd starts at boot for the first "
        "context to take). 'At once' rows: create -> first result with no pause, the warm kernel "
        "still starting. Issue target: the first Python result <= 100 ms.",
    ),
    (
        "snapshot",
        "11. Snapshots",
        "A sandbox of a BusyBox image (imported as a snapshot) with 10 MB of random data written: "
        "`POST /sandboxes/{id}/snapshots` until its 202 (the writable layer copied while the "
        "sandbox is frozen, then thawed) and until GET says Ready (the layer compressed and "
        "committed into the image store); a create from the snapshot to its first command result "
        "next to a create from the base image. Issue targets: capture <= 50 ms plus the copy of "
        "10 MB; restore as fast as a create.",
    ),
    (
        "scale",
        "12. Scale: cost with many live sandboxes",
        "Idle sandboxes created through the API in steps; with each step's count standing, "
        "create (POST until GET says Running), exec (`POST /command` `echo` through the "
        "server's proxy route, a random live sandbox), list (`GET /v1/sandboxes`, the default "
        "page of 20) and delete (DELETE until 204) are sampled one at a time, and the server's RSS "
        "and the host's MemAvailable drop are read. Issue target: p50 at 10,000 within 1.5\u00d7 "
        "of p50 at 100. Docker row: the same through sbx's docker provider, time-boxed.",
    ),
    (
        "pool",
        "13. Pools: a warm sandbox",
        "A pool of warm sandboxes (`POST /v1/pools`, bufferMin = bufferMax = 2) and, round by round "
        "side by side: a pooled create (`extensions.poolRef`) -> endpoint -> first `true` result "
        "(the warm sandbox's execd is up: no /ping), an ordinary create -> endpoint -> execd /ping -> "
        "first `true` result, and one `POST /command` `true` on a running sandbox through its "
        "endpoint over a kept-alive connection (the reference). Each taken sandbox is deleted and "
        "the pool refilled between rounds, untimed. Issue target: pooled p50 <= 1.5x the exec round "
        "trip p50.",
    ),
    (
        "api",
        "7. API throughput",
        "wrk against the lifecycle API (2 threads; the server shares the 2 cores with wrk).",
    ),
    (
        "desktop",
        "8. Desktop",
        "A native sandbox with a 1280x800 desktop (Xvnc + openbox + buses) and an xterm on it, "
        "driven through the server's router (client-side times). sbx rows: execd's /desktop API "
        "(an MIT-SHM grab on a kept X connection, XTest in-process). The other rows do the same "
        "thing the OSWorld way, in the same sandbox: a process per operation (`xdotool` for an "
        "action, `ffmpeg -f x11grab` for a screenshot, then its download) started through "
        "`POST /command`. Issue targets: ready <= 100 ms, PNG <= 5 ms, JPEG <= 2 ms, an action "
        "<= 1 ms, an idle desktop <= 80 MB PSS.",
    ),
    (
        "desktopenv",
        "9. DesktopEnv",
        "OSWorld's loop on sbx through the Python SDK (`sbx.desktop_env.DesktopEnv`, computer_13, "
        "1280x800, native provider): reset of a one-step task (a fresh sandbox with a desktop, its "
        "OSWorld API up, the step run), a step with a screenshot observation (pause 0), evaluate "
        "(a command and exact_match), the memory of an idle environment, and reset times with "
        "more environments resetting at once. OSWorld resets by reverting a VM snapshot: >= 60 s "
        "(published, not run here). Issue targets: reset <= 1 s p50, step <= 20 ms p50.",
    ),
]


def load_records(workdir):
    out = []
    for path in sorted(glob.glob(os.path.join(workdir, "records", "*.json"))):
        with open(path, encoding="utf-8") as f:
            out.append(json.load(f))
    return out


def summarize_record(rec):
    if rec.get("kind") == "latency":
        rec["summary"] = stats.summarize(rec.get("samples", []), rec.get("exit_codes"))
        w = rec.get("warmup")
        if w:
            rec["warmup_summary"] = stats.summarize(w["samples"], w["exit_codes"])
    return rec


def ratio_key(rec):
    """Rows with the same key measure the same thing (API rows carry one; start rows: the variant)."""
    return rec.get("ratio_key") or rec.get("variant", "")


def sbx_reference(records, section, key):
    for r in records:
        if (
            r["section"] == section
            and r["tool"] == "sbx"
            and ratio_key(r) == key
            and r.get("summary", {}).get("ok")
        ):
            return r
    return None


def sbx_name(ref):
    """'sbx', or 'sbx (process provider)' when the server said which provider ran the sandbox:
    a ratio against a provider without isolation must say so."""
    return f"sbx ({ref['provider']} provider)" if ref.get("provider") else "sbx"


def target_text(rec):
    """'6.90 ms vs 3.70 ms = 1.86× — **met**' for an issue-target record, or why there is none."""
    t = rec.get("target") or {}
    if rec["status"] == "not_measured":
        return f"not measured: {rec.get('reason', '')}"
    if t.get("ratio") is None:
        return f"FAILED: {rec.get('reason') or 'no p50 on one side'}"
    return (f"{stats.fmt_ms(t['api_p50'])} ms vs {stats.fmt_ms(t['sbx_run_p50'])} ms = {t['ratio']:.2f}\u00d7 "
            f"\u2014 **{t['verdict']}**")


def ratio_cell(rec, records):
    s = rec.get("summary", {})
    if rec.get("target"):
        t = rec["target"]
        if t.get("ratio") is None:
            return "no ratio: `sbx run` not measured"
        return (f"vs `sbx run` p50 {stats.fmt_ms(t['sbx_run_p50'])} ms: {t['ratio']:.2f}\u00d7 "
                f"(target \u2264 {t['limit']:g}\u00d7: **{t['verdict']}**)")
    if rec["tool"] == "sbx" or not s.get("ok"):
        return ""
    ref = sbx_reference(records, rec["section"], ratio_key(rec))
    if ref is None:
        return "no ratio: sbx not measured"
    p50 = stats.ratio_text(rec["tool"], s["p50"], ref["summary"]["p50"])
    if ref.get("provider"):
        p50 += f"; sbx row: {sbx_name(ref)}"
    p99 = stats.ratio(s["p99"], ref["summary"]["p99"])
    return p50 + (f"; p99 ratio {p99:.2f}\u00d7" if p99 else "")


def warmup_cell(rec):
    w = rec.get("warmup")
    if not w or not w["samples"]:
        return "none"
    ws = rec["warmup_summary"]
    first = stats.fmt_ms(w["samples"][0])
    failed = f", {ws['failures']} failed" if ws["failures"] else ""
    return f"{ws['runs']} runs: first {first}, p50 {stats.fmt_ms(ws.get('p50'))}{failed}"


def cpu_cell(rec):
    if rec.get("cpu_mean_s") is None:
        return "-"
    cell = stats.fmt_ms(rec["cpu_mean_s"])
    return cell + " (CLI only)" if rec["tool"] == "docker" else cell


def latency_table(recs, records):
    cpu = any("cpu_mean_s" in r for r in recs)
    lines = [
        "| tool | variant | runs | failed | warm-up (ms, not in the stats) | p50 ms | p90 ms "
        "| p99 ms | min ms | max ms |" + (" CPU ms/run |" if cpu else "") + " ratio to sbx (p50; >1 = sbx faster) |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---:|" + ("---:|" if cpu else "") + "---|",
    ]
    for r in recs:
        s = r["summary"]
        lines.append(
            f"| {r['tool']} | {r.get('variant', '')} | {s['runs']} | {s['failures']} "
            f"| {warmup_cell(r)} | {stats.fmt_ms(s.get('p50'))} | {stats.fmt_ms(s.get('p90'))} "
            f"| {stats.fmt_ms(s.get('p99'))} | {stats.fmt_ms(s.get('min'))} "
            f"| {stats.fmt_ms(s.get('max'))} |" + (f" {cpu_cell(r)} |" if cpu else "") + f" {ratio_cell(r, records)} |"
        )
    if cpu:
        lines += ["", "CPU ms/run: mean user + system CPU time of the command's whole process tree per run "
                  "(hyperfine's rusage of the child). Work done by daemons is not in it: for docker that is "
                  "dockerd, containerd and the shim, so docker's figure is its CLI only. Nor is the work of "
                  "processes the tool does not reap before it exits: bwrap and sbx both exit once their "
                  "sandbox's init reports the command's status, so that init (which did the mount setup "
                  "and tears the namespaces down) and sbx's detached teardown are not counted for either."]
    return lines


def commands_list(recs):
    lines = ["", "Exactly what was run (ROOTFS/BUNDLE are the same busybox tree, see the JSON):", ""]
    for r in recs:
        what = r.get("what", "")
        lines.append(f"- **{r['tool']}** ({r.get('variant', '')}): `{r.get('command', '')}` — {what}")
    return lines


def target_detail(rec):
    """The issue-target row's two sides in one line (the table row holds the API side)."""
    run, first = rec["sbx_run"], rec["to_first_result"]["summary"]
    rs = run["summary"]
    side = (f"`sbx {run['command'].split(' ', 1)[-1]}`: p50 {stats.fmt_ms(rs.get('p50'))} ms, "
            f"p90 {stats.fmt_ms(rs.get('p90'))} ms, {rs['runs']} runs ({rs['failures']} failed)")
    if run.get("errors"):
        side += f"; hyperfine failed in {len(run['errors'])} round(s): {run['errors'][0]}"
    return (f"- **{rec.get('variant', '')}**, issue target: API create->first `true`->delete p50 "
            f"{stats.fmt_ms(rec['target']['api_p50'])} ms (to the first result {stats.fmt_ms(first.get('p50'))} ms) "
            f"vs {side}; {rec['rounds']} rounds of {rec['runs_per_round']} of each, network {rec['network']}, "
            f"image {rec['image']}; load average (1, 5, 15 min) {' '.join(rec['loadavg_before'])} before, "
            f"{' '.join(rec['loadavg_after'])} after: {target_text(rec)}")


def pool_detail(rec):
    """A pool row against the exec round trip: its p50 and p99 ratios (and the target's verdict)."""
    v = rec["vs_exec"]
    if v.get("p50_ratio") is None:
        return f"- **{rec.get('variant', '')}**: no ratio (a side has no successful run)"
    text = (f"- **{rec.get('variant', '')}** vs one exec round trip: p50 {stats.fmt_ms(rec['summary'].get('p50'))} ms / "
            f"{stats.fmt_ms(v['exec_p50'])} ms = {v['p50_ratio']:.2f}\u00d7, p99 "
            f"{stats.fmt_ms(rec['summary'].get('p99'))} ms / {stats.fmt_ms(v['exec_p99'])} ms = "
            f"{v['p99_ratio']:.2f}\u00d7")
    if v.get("limit"):
        text += f" (target p50 \u2264 {v['limit']:g}\u00d7: **{v['verdict']}**)"
    return text


def throughput_table(recs):
    lines = [
        "| tool | variant | size | direction | seconds | MiB/s | content check | notes |",
        "|---|---|---:|---|---:|---:|---|---|",
    ]
    for r in recs:
        for v in r.get("values", []):
            secs = v.get("seconds")
            mibs = v["bytes"] / 1048576 / secs if secs else None
            lines.append(
                f"| {r['tool']} | {r.get('variant', '')} | {stats.fmt_bytes(v['bytes'])} "
                f"| {v['direction']} | {secs:.3f} | {mibs:.1f} | {v.get('check', '-')} "
                f"| {v.get('notes', '')} |"
                if secs and v.get("ok")
                else f"| {r['tool']} | {r.get('variant', '')} | {stats.fmt_bytes(v['bytes'])} "
                f"| {v['direction']} | failed | - | - | {v.get('error', '')} |"
            )
    return lines


def wrk_table(recs):
    lines = [
        "| target | threads/conns/duration | requests/s | p50 ms | p90 ms | p99 ms | errors | non-2xx |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in recs:
        w = r.get("wrk", {})
        lines.append(
            f"| {r.get('variant', '')} | {w.get('threads')}/{w.get('connections')}/{w.get('duration')} "
            f"| {w.get('requests_per_s', '-')} | {w.get('p50_ms', '-')} | {w.get('p90_ms', '-')} "
            f"| {w.get('p99_ms', '-')} | {w.get('errors', '-')} | {w.get('non2xx', '-')} |"
        )
    return lines


def curve_table(recs):
    lines = []
    for r in recs:
        lines.append(f"**{r['tool']} {r.get('variant', '')}**: {r.get('what', '')}")
        lines.append("")
        for k, v in r.get("facts", {}).items():
            lines.append(f"- {k}: {v}")
        lines.append("")
    return lines


SCALE_OPS = ("create", "exec", "list", "delete")


def idle_cpu_cell(p):
    """The share of all CPUs busy while only idle sandboxes stood, and its biggest user."""
    if p.get("idle_cpu_busy") is None:
        return "-"
    top = p.get("idle_cpu_top") or []
    who = f" ({top[0]['comm']} {top[0]['share'] * 100:.0f} %)" if top else ""
    return f"{p['idle_cpu_busy'] * 100:.0f} %{who}"


def scale_table(recs):
    lines = []
    for r in recs:
        lines += [f"**{r['tool']} ({r.get('variant', '')})**: {r.get('what', '')}", ""]
        head = "| live sandboxes | " + " | ".join(f"{op} p50 / p99 ms" for op in SCALE_OPS)
        head += (" | server RSS | RSS / sandbox | cgroups / sandbox | host / sandbox | fill time"
                 " | host CPUs busy while idle |")
        lines += [head, "|" + "---|" * (len(SCALE_OPS) + 7)]
        for p in r.get("points", []):
            cells = [f"{stats.fmt_ms(p[op]['p50'])} / {stats.fmt_ms(p[op]['p99'])}" for op in SCALE_OPS]
            lines.append(
                f"| {p['n']} | " + " | ".join(cells) + f" | {stats.fmt_bytes(p.get('server_rss'))} | "
                f"{stats.fmt_bytes(p.get('server_rss_per_sandbox'))} | "
                f"{stats.fmt_bytes(p.get('cgroup_per_sandbox'))} | "
                f"{stats.fmt_bytes(p.get('host_mem_per_sandbox'))} | {p.get('fill_seconds', 0):.0f} s | "
                f"{idle_cpu_cell(p)} |")
        lines.append("")
        for k, v in r.get("facts", {}).items():
            lines.append(f"- {k}: {v}")
        lines.append("")
    return lines


KWALK_STEPS = (("pivot_root", "`pivot_root` (every thread)"),
               ("sysfs", "mount sysfs (every network namespace's)"),
               ("cfs_quota", "CPU quota write (every cpu cgroup)"))


def kwalk_table(recs):
    """sbx-kwalk: each kernel step a create takes, p50 against the count, and its growth."""
    lines = []
    for r in recs:
        pts = r.get("points", [])
        lines += [f"**{r.get('variant', '')}**: {r.get('what', '')}", "",
                  "| host has | " + " | ".join(f"{t} p50 ms" for _, t in KWALK_STEPS) + " |",
                  "|" + "---|" * (len(KWALK_STEPS) + 1)]
        for p in pts:
            cells = [stats.fmt_ms(p[k]) if p.get(k) is not None else "-" for k, _ in KWALK_STEPS]
            lines.append(f"| {p['n']} | " + " | ".join(cells) + " |")
        if len(pts) > 1:
            a, b = pts[0], pts[-1]
            grew = [f"{k} {stats.fmt_ms(b[k] - a[k])} ms" for k, _ in KWALK_STEPS
                    if a.get(k) is not None and b.get(k) is not None]
            total = sum(b[k] - a[k] for k, _ in KWALK_STEPS if a.get(k) is not None and b.get(k) is not None)
            lines += ["", f"- added per create from {a['n']} to {b['n']}: " + ", ".join(grew)
                      + f" (together {stats.fmt_ms(total)} ms)"]
        lines.append("")
    return lines


def plot_scale(ctx):
    recs = [r for r in ctx["records"] if r.get("kind") == "scale" and r.get("points")]
    if not recs:
        return
    datadir = os.path.join(ctx["work"], "plotdata")
    os.makedirs(datadir, exist_ok=True)
    for q in ("p50", "p99"):
        series = []
        for i, r in enumerate(recs):
            dat = os.path.join(datadir, f"scale-{i}-{q}.dat")
            with open(dat, "w", encoding="utf-8") as f:
                for p in r["points"]:
                    f.write(f"{p['n']} " + " ".join(f"{p[op][q] * 1000:.4f}" for op in SCALE_OPS) + "\n")
            dash = "" if r["tool"] == "sbx" else " dt 2"
            for j, op in enumerate(SCALE_OPS):
                label = f"{r['tool']} ({r.get('variant', '')}) {op}".replace('"', "")
                series.append(f'"{dat}" using 1:{j + 2} with linespoints lw 2 lc {j + 1}{dash} title "{label}"')
        name = f"scale-latency-{q}"
        svg = os.path.join(ctx["out"], "plots", f"{ctx['stem']}-{name}.svg")
        title = f"12. Scale: {q} latency vs live idle sandboxes"
        script = "\n".join([
            'set terminal svg size 900,560 dynamic font "sans,12"', f'set output "{svg}"',
            f'set title "{title}"', "set logscale xy", 'set xlabel "live idle sandboxes (log scale)"',
            f'set ylabel "{q}, ms (log scale)"', "set grid", "set key outside right",
            "plot " + ", ".join(series)])
        if gnuplot(script):
            ctx["plots"].setdefault("scale", []).append({"title": title, "href": f"plots/{ctx['stem']}-{name}.svg"})
    series = []
    for i, r in enumerate(recs):
        dat = os.path.join(datadir, f"scale-{i}-mem.dat")
        with open(dat, "w", encoding="utf-8") as f:
            for p in r["points"]:
                f.write(f"{p['n']} {(p.get('server_rss_per_sandbox') or 0) / 1024:.2f} "
                        f"{p['host_mem_per_sandbox'] / 1024:.2f} {(p.get('cgroup_per_sandbox') or 0) / 1024:.2f}\n")
        label = f"{r['tool']} ({r.get('variant', '')})".replace('"', "")
        series.append(f'"{dat}" using 1:2 with linespoints lw 2 title "{label}: server RSS growth"')
        series.append(f'"{dat}" using 1:3 with linespoints lw 2 title "{label}: host MemAvailable drop"')
        if any(p.get("cgroup_per_sandbox") is not None for p in r["points"]):
            series.append(f'"{dat}" using 1:4 with linespoints lw 2 title "{label}: sandbox cgroups"')
    name = "scale-memory"
    svg = os.path.join(ctx["out"], "plots", f"{ctx['stem']}-{name}.svg")
    title = "12. Scale: memory per idle sandbox vs live sandboxes"
    script = "\n".join([
        'set terminal svg size 900,520 dynamic font "sans,12"', f'set output "{svg}"',
        f'set title "{title}"', "set logscale x", 'set xlabel "live idle sandboxes (log scale)"',
        'set ylabel "KiB per sandbox"', "set grid", "set key outside right", "plot " + ", ".join(series)])
    if gnuplot(script):
        ctx["plots"].setdefault("scale", []).append({"title": title, "href": f"plots/{ctx['stem']}-{name}.svg"})


def order_rows(recs):
    """Rows grouped by variant (in order of first appearance), sbx first within each group."""
    keys = []
    for r in recs:
        if ratio_key(r) not in keys:
            keys.append(ratio_key(r))
    return sorted(recs, key=lambda r: (keys.index(ratio_key(r)), r["tool"] != "sbx"))


def section_lines(key, title, desc, records, plots):
    recs = [r for r in records if r["section"] == key]
    if not recs:  # a section bench/run --only did not run (a full run lists every section)
        return []
    lines = [f"## {title}", "", desc, ""]
    providers = sorted({r["provider"] for r in recs if r.get("provider")})
    if providers:
        lines += [f"sbx rows: sandboxes of the server's `{'`, `'.join(providers)}` provider (as the create "
                  "response reported).", ""]
    if "process" in providers:
        lines += ["> **The `process` provider runs sbx-execd as a plain host process, without isolation.** "
                  "Ratios against it compare Docker containers with unisolated processes: they show the "
                  "API and execd overhead, not what an isolated sbx sandbox costs.", ""]
    measured = [r for r in recs if r["status"] in ("measured", "failed")]
    lat = order_rows([r for r in measured if r.get("kind") == "latency"])
    if lat:
        lines += latency_table(lat, records)
        if key == "start":
            lines += commands_list(lat)
        else:
            lines += [""] + [f"- **{r.get('variant', '')}**: {r.get('what', '')}" for r in lat]
        for r in lat:
            wd = r.get("with_delete")
            if wd and wd.get("ok"):
                lines.append(
                    f"- **{r.get('variant', '')}**, until the DELETE returned too: p50 {stats.fmt_ms(wd['p50'])} ms, "
                    f"p90 {stats.fmt_ms(wd['p90'])} ms, p99 {stats.fmt_ms(wd['p99'])} ms"
                )
        lines += [target_detail(r) for r in lat if r.get("target")]
        lines += [pool_detail(r) for r in lat if r.get("vs_exec")]
    tp = [r for r in measured if r.get("kind") == "throughput"]
    if tp:
        lines += [""] + throughput_table(tp)
        lines += [""] + [f"- **{r.get('variant', '')}**: to {r['destination']}" for r in tp if r.get("destination")]
    wk = [r for r in measured if r.get("kind") == "wrk"]
    if wk:
        lines += [""] + wrk_table(wk)
    cv = [r for r in measured if r.get("kind") == "curve"]
    if cv:
        lines += [""] + curve_table(cv)
    sc = [r for r in measured if r.get("kind") == "scale"]
    if sc:
        lines += [""] + scale_table(sc)
    kw = [r for r in measured if r.get("kind") == "kwalk"]
    if kw:
        lines += [""] + kwalk_table(kw)
    for p in plots.get(key, []):
        lines += ["", f"![{p['title']}]({p['href']})"]
    if (lat or cv or sc) and not plots.get(key) and not shutil.which("gnuplot"):
        lines += ["", "(no plot: gnuplot is not installed)"]
    skipped = [r for r in recs if r["status"] == "not_measured"]
    if skipped:
        lines += ["", "Not measured:", ""]
        for r in skipped:
            lines.append(f"- {r['tool']} {r.get('variant', '')}: not measured: {r['reason']}")
    failed = [r for r in recs if r["status"] == "failed"]
    for r in failed:
        lines.append(f"- {r['tool']} {r.get('variant', '')}: FAILED: {r.get('reason', '')}")
    return lines + [""]


def published_lines(published, records):
    lines = [
        "## Published numbers of peers (NOT measured here)",
        "",
        "Transcribed from the peers' own material or third-party reports (source column). Other "
        "hardware, other networks (often over the internet), other definitions: they are context, "
        "not a comparison, and no ratio above uses them.",
        "",
        "| peer | what | published value | kind | source | sbx measured here (p50, this machine) |",
        "|---|---|---|---|---|---|",
    ]
    sbx_by_metric = {}
    for r in records:
        if r["tool"] == "sbx" and r.get("summary", {}).get("ok"):
            sbx_by_metric.setdefault(r["section"], f"{stats.fmt_ms(r['summary']['p50'])} ms ({r['variant']})")
    for r in records:
        if r["section"] == "density" and r["tool"].startswith("sbx") and r.get("slope_bytes"):
            sbx_by_metric.setdefault("density", f"{stats.fmt_bytes(r['slope_bytes'])} per idle sandbox ({r['variant']})")
    metric_section = {"start": "start", "tti": "tti", "tti_parallel": "tti", "exec": "exec", "pause": "pause",
                      "density": "density"}
    for p in published["rows"]:
        here = sbx_by_metric.get(metric_section.get(p["metric"], ""), "not measured")
        lines.append(
            f"| {p['peer']} | {p['what']} | {p['value']} | {p['kind']} | {p['source']} | {here} |"
        )
    return lines + [""]


def machine_lines(machine, mode, notes, config):
    mem_gib = machine["mem_total_kib"] / 1048576
    lines = [
        "## Machine",
        "",
        f"- CPU: {machine['cpu_model']} × {machine['cores']} (virtualization flags: "
        f"{', '.join(machine['cpu_flags_virt']) or 'none'})",
        f"- Memory: {mem_gib:.1f} GiB, swap {machine['swap_total_kib'] // 1024} MiB",
        f"- Kernel {machine['kernel']}, {machine['os']}; cgroups: {machine['cgroup_mode']}, "
        f"cgroup2 controllers: {' '.join(machine['cgroup2_controllers'] or []) or 'none'}",
        f"- Load average at start: {' '.join(machine['loadavg_at_start'])}; at end: "
        f"{' '.join(machine.get('loadavg_at_end', []))}",
        f"- Mode: {mode}",
        f"- sbx commit: {config.get('git_commit', '?')}{' (with uncommitted changes)' if config.get('git_dirty') else ''}",
        "- Tool versions: "
        + "; ".join(f"{k} `{v}`" for k, v in machine["tool_versions"].items() if v),
        "",
    ]
    load1 = float(machine["loadavg_at_start"][0])
    load1_end = float(machine.get("loadavg_at_end", ["0"])[0])
    if max(load1, load1_end) > 0.5 * machine["cores"]:
        lines += [f"> **Noisy run:** the 1-minute load average was {load1:.1f} at the start and {load1_end:.1f} "
                  f"at the end on {machine['cores']} cores, so other work shared the CPUs. Absolute numbers "
                  "and tails are inflated; the tools took turns in rounds, so ratios from this run are "
                  "less affected than absolute values.", ""]
    for n in notes:
        lines.append(f"> {n}")
        lines.append("")
    return lines


def counts_lines(records):
    measured = sum(1 for r in records if r["status"] == "measured")
    failed = sum(1 for r in records if r["status"] == "failed")
    skipped = [r for r in records if r["status"] == "not_measured"]
    failed_runs = sum(r.get("summary", {}).get("failures", 0) for r in records)
    return [
        f"**{measured} measurements made, {failed} failed entirely, {len(skipped)} not measured** "
        f"(each listed with its reason below); {failed_runs} individual failed runs counted "
        "in the tables (excluded from the percentiles, never dropped).",
        "",
    ]


def headline_lines(records):
    """The sandbox-start rows of the run in one small table (what a README would show)."""
    rows = order_rows([r for r in records if r["section"] == "start" and r.get("summary", {}).get("ok")])
    if not rows:
        return []
    lines = [
        "## Headline: sandbox start (`/bin/true` in a fresh sandbox, create to exit, same rootfs)",
        "",
        "| tool | variant | p50 ms | p99 ms | runs (failed) | vs sbx (p50) |",
        "|---|---|---:|---:|---:|---|",
    ]
    for r in rows:
        s = r["summary"]
        ref = sbx_reference(records, "start", ratio_key(r))
        vs = "" if r["tool"] == "sbx" else (
            stats.ratio_text(r["tool"], s["p50"], ref["summary"]["p50"]) if ref else "sbx not measured")
        lines.append(
            f"| {r['tool']} | {r.get('variant', '')} | {stats.fmt_ms(s['p50'])} | {stats.fmt_ms(s['p99'])} "
            f"| {s['runs']} ({s['failures']}) | {vs} |"
        )
    return lines + [""]


def target_lines(records):
    """The issue's speed target, one line per server variant (details in section 2)."""
    recs = [r for r in records if r["section"] == "tti" and r["id"].startswith("tti.target")]
    if not recs:
        return []
    lines = ["Issue target (API create\u2192first `true`\u2192delete p50 \u2264 2\u00d7 `sbx run` p50, same image and "
             "network, interleaved; details in section 2):", ""]
    for r in recs:
        label = r.get("label") or r.get("variant", "")
        where = f" (network {r['network']}, load average {r['loadavg_before'][0]} \u2192 {r['loadavg_after'][0]})" \
            if r.get("target", {}).get("ratio") is not None else ""
        lines.append(f"- {label}: {target_text(r)}{where}")
    return lines + [""]


def write_md(path, ctx):
    machine, records = ctx["machine"], ctx["records"]
    lines = [f"# sbx benchmark — {machine['time_utc'][:10]} on {machine['host']}", ""]
    lines += counts_lines(records)
    lines += headline_lines(records)
    lines += target_lines(records)
    lines += machine_lines(machine, ctx["mode"], ctx["notes"], ctx.get("config", {}))
    for key, title, desc in SECTIONS:
        lines += section_lines(key, title, desc, records, ctx["plots"])
    lines += published_lines(ctx["published"], records)
    lines.append(f"Raw samples, exit codes and tool versions: [{ctx['stem']}.json]({ctx['stem']}.json).")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def gnuplot(script):
    if not shutil.which("gnuplot"):
        return False
    res = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True, check=False)
    return res.returncode == 0


def plot_cdf(ctx, key, recs, name, title):
    datadir = os.path.join(ctx["work"], "plotdata")
    os.makedirs(datadir, exist_ok=True)
    series = []
    for i, r in enumerate(recs):
        ok = [s for s, c in zip(r["samples"], r["exit_codes"]) if c == 0]
        if not ok:
            continue
        dat = os.path.join(datadir, f"{name}-{i}.dat")
        with open(dat, "w", encoding="utf-8") as f:
            for x, y in stats.cdf_points(ok):
                f.write(f"{x * 1000:.6f} {y:.6f}\n")
        label = f"{r['tool']} ({r.get('variant', '')}), n={len(ok)}".replace('"', "")
        series.append(f'"{dat}" using 1:2 with steps lw 2 title "{label}"')
    if not series:
        return
    svg = os.path.join(ctx["out"], "plots", f"{ctx['stem']}-{name}.svg")
    script = "\n".join(
        [
            'set terminal svg size 900,520 dynamic font "sans,12"',
            f'set output "{svg}"',
            f'set title "{title}"',
            "set logscale x",
            'set xlabel "wall time per run, ms (log scale)"',
            'set ylabel "fraction of runs <= x"',
            "set yrange [0:1.02]",
            "set grid",
            "set key bottom right",
            "plot " + ", ".join(series),
        ]
    )
    if gnuplot(script):
        ctx["plots"].setdefault(key, []).append(
            {"title": title, "href": f"plots/{ctx['stem']}-{name}.svg"}
        )


def plot_curves(ctx):
    for i, r in enumerate(r for r in ctx["records"] if r.get("kind") == "curve" and r.get("points")):
        dat = os.path.join(ctx["work"], "plotdata", f"curve-{i}.dat")
        os.makedirs(os.path.dirname(dat), exist_ok=True)
        alt = dict(r.get("points_alt") or [])
        with open(dat, "w", encoding="utf-8") as f:
            for x, y in r["points"]:
                f.write(f"{x} {y / 1048576:.3f} {alt.get(x, 0) / 1048576:.3f}\n")
        name = f"{r['section']}-{i}"
        svg = os.path.join(ctx["out"], "plots", f"{ctx['stem']}-{name}.svg")
        title = f"{r['tool']}: {r.get('curve_title', 'host memory used vs idle sandboxes')}"
        script = "\n".join(
            [
                'set terminal svg size 900,520 dynamic font "sans,12"',
                f'set output "{svg}"',
                f'set title "{title}"',
                f'set xlabel "{r.get("x_label", "idle sandboxes")}"',
                f'set ylabel "{r.get("y_label", "MiB")}"',
                "set grid",
                f'plot "{dat}" using 1:2 with {"lines" if len(r["points"]) > 60 else "linespoints"} lw 2 '
                f'title "{r["tool"]}: accounted"'
                + (f', "{dat}" using 1:3 with lines lw 1 title "{r["alt_title"]}"' if alt else ""),
            ]
        )
        if gnuplot(script):
            ctx["plots"].setdefault(r["section"], []).append(
                {"title": title, "href": f"plots/{ctx['stem']}-{name}.svg"}
            )


def make_plots(ctx):
    os.makedirs(os.path.join(ctx["out"], "plots"), exist_ok=True)
    for key, title, _ in SECTIONS:
        lat = [
            r
            for r in ctx["records"]
            if r["section"] == key and r.get("kind") == "latency" and r.get("summary", {}).get("ok")
        ]
        for k in sorted({ratio_key(r) for r in lat}):
            recs = [r for r in lat if ratio_key(r) == k]
            # issue-target rows: their `sbx run` side in the same plot
            recs += [{"tool": "sbx run", "variant": r.get("label", ""), **r["sbx_run"]} for r in recs if r.get("sbx_run")]
            slug = "-".join("".join(c if c.isalnum() else " " for c in k).split()) or "all"
            label = recs[0].get("variant", "") if len(recs) == 1 else k
            plot_cdf(ctx, key, recs, f"{key}-{slug}", f"{title}: {label} (empirical CDF)")
    plot_curves(ctx)
    plot_scale(ctx)


def main(args):
    with open(os.path.join(args.work, "machine.json"), encoding="utf-8") as f:
        machine = json.load(f)
    with open(args.published, encoding="utf-8") as f:
        published = json.load(f)
    with open("/proc/loadavg", encoding="utf-8") as f:
        machine["loadavg_at_end"] = f.read().split()[:3]
    records = [summarize_record(r) for r in load_records(args.work)]
    ctx = {
        "machine": machine,
        "records": records,
        "published": published,
        "mode": args.mode,
        "notes": args.notes,
        "stem": args.stem,
        "out": args.out,
        "work": args.work,
        "plots": {},
    }
    os.makedirs(args.out, exist_ok=True)
    make_plots(ctx)
    config = {}
    if os.path.exists(os.path.join(args.work, "config.json")):
        with open(os.path.join(args.work, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
    ctx["config"] = config
    result = {
        "schema": 1,
        "mode": args.mode,
        "config": config,
        "notes": args.notes,
        "machine": machine,
        "records": records,
        "not_measured": [
            {"id": r["id"], "reason": r["reason"]} for r in records if r["status"] == "not_measured"
        ],
        "published_reference": published,
        "plots": ctx["plots"],
    }
    with open(os.path.join(args.out, f"{args.stem}.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    write_md(os.path.join(args.out, f"{args.stem}.md"), ctx)
    for ext in ("json", "md"):
        scrub(os.path.join(args.out, f"{args.stem}.{ext}"), args.work)
    return 0


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def scrub_text(text, work):
    """No path of the machine that ran the bench in a result: the work dir becomes $WORK,
    the checkout's root the relative path."""
    if work:
        text = text.replace(os.path.abspath(work), "$WORK")
    text = text.replace(ROOT + "/", "")
    text = re.sub(r"/[^ ()\"']*/(build/[a-z]+/sbx)", r"\1", text)  # another checkout's build
    return re.sub(r"/var/tmp/sbx-bench\.[A-Za-z0-9]+", "$WORK", text)


def scrub(path, work):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(scrub_text(text, work))
