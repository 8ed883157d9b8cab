"""A private desktop for one test: Xvnc, the accessibility bus, at-spi2-registryd, Chromium.

Each test re-executes itself in new network and mount namespaces (unshare), with a tmpfs on
/tmp/.X11-unix, so parallel tests never meet on a display number or an X socket (abstract X
sockets belong to the network namespace). Needs root; exits 77 (skipped) when the desktop
packages are missing.

    env.enter_private_namespace()          # first thing in a test's main
    with env.Desktop() as d:               # Xvnc + bus + registryd
        d.chromium(page_path)              # an X client on the page
        xml = d.dump()                     # sbx-a11y-dump's output
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
REGISTRYD = "/usr/libexec/at-spi2-registryd"
A11Y_CONF = "/usr/share/defaults/at-spi2/accessibility.conf"
SYS_PYTHON = "/usr/bin/python3"  # Debian's, which has pyatspi and dbus


def need(*paths):
    for p in paths:
        if not (os.path.exists(p) or shutil.which(p)):
            print(f"SKIP: {p} not installed (scripts/deps.sh)")
            sys.exit(SKIP)


def enter_private_namespace():
    if os.environ.get("SBX_DESKTOP_NS") == "1":
        return
    if os.geteuid() != 0:
        print("SKIP: needs root (namespaces, mounts)")
        sys.exit(SKIP)
    need("Xvnc", "dbus-daemon", "xprop", "xdotool", REGISTRYD, A11Y_CONF, CHROMIUM, "unshare")
    os.environ["SBX_DESKTOP_NS"] = "1"
    os.execvp("unshare", ["unshare", "--net", "--mount", "--propagation", "private",
                          sys.executable] + sys.argv)


def _private_mounts():
    os.makedirs("/tmp/.X11-unix", mode=0o1777, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/tmp/.X11-unix"],
                   check=True)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


class Desktop:
    def __init__(self, dump=None, width=1280, height=800):
        self.size = (width, height)
        self.procs = []
        self.tmp = tempfile.mkdtemp(prefix="sbx-a11y-")
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.tmp,
                    "XDG_RUNTIME_DIR": self.tmp, "XDG_CONFIG_HOME": self.tmp + "/.config",
                    "XDG_CACHE_HOME": self.tmp + "/.cache", "LANG": "C.UTF-8"}
        self.bus = None
        self.dump_bin = dump or os.environ.get("SBX_A11Y_DUMP")

    # -- lifecycle --
    def __enter__(self):
        _private_mounts()
        try:
            self._xvnc()
            self._bus()
            self._registryd()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGCONT)
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.wait()
        self.procs = []
        shutil.rmtree(self.tmp, ignore_errors=True)

    def spawn(self, argv, env=None, **kw):
        e = dict(self.env)
        e.update(env or {})
        p = subprocess.Popen(argv, env=e, start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def _xvnc(self):
        r, w = os.pipe()
        w_, h = self.size
        self.spawn(["Xvnc", "-geometry", f"{w_}x{h}", "-depth", "24", "-SecurityTypes", "None",
                    "-nolisten", "tcp", "-rfbport", "0", "-displayfd", str(w)],
                   pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(w)
        num = _read_line(r, 10, "Xvnc -displayfd")
        self.env["DISPLAY"] = ":" + num

    def _bus(self):
        r, w = os.pipe()
        path = os.path.join(self.tmp, "a11y-bus")
        self.spawn(["dbus-daemon", "--config-file=" + A11Y_CONF, "--nofork",
                    "--address=unix:path=" + path, f"--print-address={w}"],
                   pass_fds=(w,), stderr=subprocess.DEVNULL)
        os.close(w)
        self.bus = _read_line(r, 10, "dbus-daemon --print-address")
        # Apps find the bus by the root window's AT_SPI_BUS property (no session bus).
        subprocess.run(["xprop", "-root", "-f", "AT_SPI_BUS", "8s", "-set", "AT_SPI_BUS",
                        self.bus], env=self.env, check=True)

    def _registryd(self):
        self.spawn([REGISTRYD], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            r = subprocess.run(["dbus-send", "--bus=" + self.bus, "--print-reply",
                                "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                                "org.freedesktop.DBus.NameHasOwner",
                                "string:org.a11y.atspi.Registry"],
                               capture_output=True, text=True)
            if "boolean true" in r.stdout:
                return
            time.sleep(0.02)
        raise RuntimeError("at-spi2-registryd did not take its name")

    # -- clients --
    def chromium(self, page, extra=()):
        """Chromium as an X client on a local page, app mode at (0, 0), full screen size."""
        w, h = self.size
        argv = [CHROMIUM, "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--force-renderer-accessibility", "--user-data-dir=" + self.tmp + "/chromium",
                "--window-position=0,0", f"--window-size={w},{h}", "--app=file://" + page]
        argv += list(extra)
        return self.spawn(argv, env={"ACCESSIBILITY_ENABLED": "1",
                                     "DBUS_SESSION_BUS_ADDRESS": "disabled:"},
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def dump(self, *args, check=True):
        """(tree text, stats dict) from sbx-a11y-dump."""
        r = subprocess.run([self.dump_bin] + list(args) + [self.bus], capture_output=True,
                           text=True, env=self.env)
        if check and r.returncode != 0:
            raise RuntimeError(f"sbx-a11y-dump failed: {r.stderr}")
        stats = [json.loads(line) for line in r.stderr.splitlines() if line.startswith("{")]
        return r.stdout, stats

    def wait_for(self, pred, timeout=30, what="the tree"):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            out, _ = self.dump("--json", check=False)
            try:
                last = json.loads(out)
            except ValueError:
                last = None
            if last is not None and pred(last):
                return last
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}")

    def xdotool(self, *args):
        subprocess.run(["xdotool"] + [str(a) for a in args], env=self.env, check=True)

    def pyatspi(self, script, *args, stats=False):
        """Run a pyatspi script (Debian's python3) against this desktop: its stdout (and the
        JSON lines of its stderr with stats=True)."""
        r = subprocess.run([SYS_PYTHON, script] + list(args), env=self.env, capture_output=True,
                           text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"{script} failed: {r.stderr[-2000:]}")
        if stats:
            return r.stdout, [json.loads(x) for x in r.stderr.splitlines() if x.startswith("{")]
        return r.stdout


def _read_line(fd, timeout, what):
    import select
    buf = b""
    deadline = time.time() + timeout
    while not buf.endswith(b"\n"):
        left = deadline - time.time()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            os.close(fd)
            raise RuntimeError(f"{what}: nothing within {timeout} s")
        chunk = os.read(fd, 256)
        if not chunk:
            break
        buf += chunk
    os.close(fd)
    if not buf.strip():
        raise RuntimeError(f"{what}: closed without an answer")
    return buf.decode().strip()


def find(node, pred):
    """Depth-first search of a JSON tree."""
    if pred(node):
        return node
    for k in node.get("children", []):
        hit = find(k, pred)
        if hit is not None:
            return hit
    return None


def count(node):
    return 1 + sum(count(k) for k in node.get("children", []))
