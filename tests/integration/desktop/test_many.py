"""20 desktops at once (issue 12): 20 native sandboxes created in parallel with
extensions["sbx.desktop"], each with an xterm on it; every one answers a screenshot of its own
size and an action; the memory per desktop (PSS of its processes: Xvnc, openbox, the buses,
the registry, xterm) is measured and printed; after delete no desktop process is left.

  argv[1] = the sbx binary (sbx-execd next to it)
"""
import concurrent.futures
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from harness import Skip, check, main, wait_for  # noqa: E402
from test_desktop import CONFIG, NEEDED, Desk, png_decode  # noqa: E402

COUNT = 20
DESKTOP_PROCS = {"Xvnc", "openbox", "dbus-daemon", "at-spi2-registr", "xterm"}


def pss_kib(pid):
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def sandbox_of(pid):
    """The sandbox id in a process's cgroup path (native sandboxes: .../sbx/<id>)."""
    try:
        with open("/proc/%d/cgroup" % pid) as f:
            for line in f:
                parts = line.strip().split("/")
                if len(parts) >= 2 and parts[-2] == "sbx":
                    return parts[-1]
    except OSError:
        pass
    return None


def host_desktop_procs():
    out = subprocess.run(["pgrep", "-x", "Xvnc"], capture_output=True, text=True).stdout
    return set(out.split())


def test(new_server):
    for p in NEEDED:
        if not any(os.access(os.path.join(d, p), os.X_OK)
                   for d in os.environ.get("PATH", "/usr/bin").split(":")):
            raise Skip("%s not installed (scripts/deps.sh)" % p)
    if os.geteuid() != 0:
        raise Skip("native sandboxes need root")
    s = new_server(config_text=CONFIG, tag="many")
    s.start()
    before = host_desktop_procs()

    def make(i):
        # sizes differ so each answer is checked against its own desktop
        w, h = 640 + 16 * i, 480
        r = s.create(extensions={"sbx.desktop": "%dx%d" % (w, h)},
                     resourceLimits={"cpu": "1", "memory": "512Mi"})
        check(r.status in (200, 202), "create %d: %r" % (i, r))
        return r.json()["id"], (w, h)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        made = list(pool.map(make, range(COUNT)))

    def use(item):
        sid, size = item
        d = Desk(s, sid)
        d.bg("xterm -geometry 60x10+0+0 -T term-%s" % sid[:8])
        d.window("term-" + sid[:8], 60)  # 20 xterms starting at once on 2 cores
        check(png_decode(d.shot().body)[:2] == size, "%s answers with its own screen" % sid)
        d.act({"action_type": "CLICK", "parameters": {"x": 5, "y": 5}})
        return sid

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(use, made))
    print("ok   %d desktops at once, each answering with its own screen" % COUNT, flush=True)

    ids = {sid for sid, _ in made}
    by_sandbox = {}
    for d in os.listdir("/proc"):
        if d.isdigit() and comm(int(d)) in DESKTOP_PROCS:
            sb = sandbox_of(int(d))
            if sb in ids:
                by_sandbox[sb] = by_sandbox.get(sb, 0) + pss_kib(int(d))
    per = sorted(by_sandbox.values())
    check(len(per) == COUNT, "measured %d desktops" % len(per))
    print("ok   memory per desktop (PSS of Xvnc, openbox, buses, registryd, xterm): "
          "median %.1f MiB, max %.1f MiB, total %.0f MiB"
          % (per[len(per) // 2] / 1024, per[-1] / 1024, sum(per) / 1024), flush=True)

    for sid, _ in made:
        check(s.request("DELETE", "/v1/sandboxes/%s" % sid).status == 204, "delete")
    for sid, _ in made:
        s.wait_native_gone(sid)
    wait_for(lambda: host_desktop_procs() <= before, "no Xvnc left", 20)
    print("ok   nothing left after delete", flush=True)


if __name__ == "__main__":
    main(test)
