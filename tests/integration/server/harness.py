"""Harness for `sbx serve` integration tests: start a real server (and through it real
sbx-execd processes) on a free loopback port with a temp state dir, talk HTTP with the standard
library, stop everything by PID.

  argv[1] = the sbx binary; sbx-execd must be next to it (the process provider looks there).
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.parse

SKIP = 77


class Fail(Exception):
    pass


class Skip(Exception):
    """Raised by a test that ran but found something it needs missing (exit 77)."""


def check(cond, what):
    if not cond:
        raise Fail(what)


def host_address():
    """An IPv4 address of this host other than loopback and sandbox or docker bridges (its
    uplink), or None."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        dev, addr = line.split()[1], line.split()[3].split("/")[0]
        if dev != "lo" and not dev.startswith(("sbx", "docker")):
            return addr
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def session_pids(sid):
    """Pids of every live process whose session is sid."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) == sid and fields[0] not in ("Z", "X"):
            out.append(int(d))
    return out


class Resp:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def __repr__(self):
        return "<%d %r>" % (self.status, self.body[:300])


class Server:
    def __init__(self, sbx, config_text=None, tag="srv", env=None, state=None):
        self.sbx = os.path.abspath(sbx)
        self.env = env
        self.tmp = tempfile.mkdtemp(prefix="sbx-server-test-%s-%d-" % (tag, os.getpid()))
        self.state = state or os.path.join(self.tmp, "state")
        self.port = free_port()
        self.proc = None
        self.config = None
        if config_text is None:
            # the tests drive the process provider unless they say otherwise
            config_text = 'providers = { supported = ["process"]; default = "process"; };\n'
        if config_text is not None:
            self.config = os.path.join(self.tmp, "sbx.conf")
            with open(self.config, "w") as f:
                f.write(config_text)
        self.logpath = os.path.join(self.tmp, "server.log")
        self.extra_args = []  # more `sbx serve` flags
        self.wrapper = []  # a command the server runs under (e.g. prlimit ... --)

    def execd_present(self):
        return os.access(os.path.join(os.path.dirname(self.sbx), "sbx-execd"), os.X_OK)

    def start(self, expect_fail=False):
        argv = self.wrapper + [self.sbx, "serve", "--listen", "127.0.0.1:%d" % self.port,
                               "--state-dir", self.state]
        if self.config:
            argv += ["--config", self.config]
        argv += self.extra_args
        log = open(self.logpath, "ab")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        log.close()
        if expect_fail:
            return self.proc.wait(timeout=30)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise Fail("server exited with %d: %s" % (self.proc.returncode, self.log()))
            try:
                if self.request("GET", "/health", key=False).status == 200:
                    self.key = open(os.path.join(self.state, "api-key")).read().strip()
                    return 0
            except OSError:
                pass
            time.sleep(0.05)
        raise Fail("server did not answer /health")

    def start_native(self):
        """start(), or Skip when this build has no native provider (src/runtime is not part of
        it): the tests of a native server's features."""
        try:
            self.start()
        except Fail:
            if "unknown provider `native`" in self.log():
                raise Skip("this build has no native provider (src/runtime is not part of it)")
            raise

    def log(self, full=False):
        try:
            with open(self.logpath, errors="replace") as f:
                text = f.read()
                return text if full else text[-4000:]
        except OSError:
            return ""

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self):
        """SIGTERM; returns the exit status (sanitizers report leaks through it)."""
        if not self.proc or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise Fail("server did not stop on SIGTERM")

    def request(self, method, path, body=None, headers=None, key=True, raw=None, timeout=60):
        h = dict(headers or {})
        if key is True:
            h["OPEN-SANDBOX-API-KEY"] = self.key
        elif isinstance(key, str):
            h["OPEN-SANDBOX-API-KEY"] = key
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            return Resp(r.status, r.getheaders(), r.read())
        finally:
            c.close()

    def create(self, **kw):
        body = {"image": {"uri": "host"}, "entrypoint": ["sleep", "3600"],
                "resourceLimits": {"cpu": "1", "memory": "1Gi"}, "timeout": 600}
        body.update(kw)
        return self.request("POST", "/v1/sandboxes", body)

    def run(self, sid, command, timeout=60):
        """Run a command through the router; returns (stdout lines, events)."""
        r = self.request("POST", "/sandboxes/%s/proxy/44772/command" % sid,
                         {"command": command}, timeout=timeout)
        check(r.status == 200, "command through the router: %r" % r)
        events = [json.loads(x) for x in r.body.decode().split("\n\n") if x.strip()]
        return [e["text"] for e in events if e["type"] == "stdout"], events

    def sandbox_pids(self):
        """{sandbox dir name: [pids of its session]} from the provider's pid files."""
        out = {}
        base = os.path.join(self.state, "sandboxes")
        for name in os.listdir(base) if os.path.isdir(base) else []:
            try:
                pid = int(open(os.path.join(base, name, "execd.pid")).read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            out[name] = session_pids(pid)
        return out

    def wait_native_gone(self, sid, timeout=15):
        """A native delete answers once the sandbox is SIGKILLed; the rest of its teardown (its
        runtime record, writable layer, image pin, volume registrations) follows on a runtime
        thread. Wait until all of that is gone before checking what is left."""
        def gone():
            paths = [os.path.join(self.state, d, sid) for d in ("run", "upper", "images/pins")]
            vols = os.path.join(self.state, "volumes")
            for claim in os.listdir(vols) if os.path.isdir(vols) else []:
                paths.append(os.path.join(vols, claim, "users", sid))
            return not any(os.path.lexists(x) for x in paths)
        wait_for(gone, "the teardown of native sandbox %s" % sid, timeout)

    def gc_runtime(self):
        """The native provider's runtime keeps records on a tmpfs at <state>/run: remove its
        sandboxes and unmount it (sbx gc --all), else a lazy unmount."""
        run = os.path.join(self.state, "run")
        if os.path.ismount(run):
            subprocess.run([self.sbx, "gc", "--all", "--state-dir", self.state],
                           capture_output=True, timeout=60)
        if os.path.ismount(run):
            subprocess.run(["umount", "-l", run], capture_output=True, timeout=30)
        # the writable layers' file system (providers.native.total_disk): gc --all drops it
        # once empty; a test that killed its server may leave layers in it
        upper = os.path.join(self.state, "upper")
        if os.path.ismount(upper):
            subprocess.run([self.sbx, "gc", "--all", "--state-dir", self.state],
                           capture_output=True, timeout=60)
        if os.path.ismount(upper):
            subprocess.run(["umount", "-l", upper], capture_output=True, timeout=30)

    def cleanup(self):
        """Kill the server and every process a sandbox of this test started; remove the dir."""
        self.kill9()
        self.gc_runtime()
        for pids in self.sandbox_pids().values():
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
        shutil.rmtree(self.tmp, ignore_errors=True)


def main(test, sbx_arg_index=1, need_execd=True):
    """Run test(server_factory); exit 0/1/77. Every server made is cleaned up."""
    servers = []

    def factory(**kw):
        s = Server(sys.argv[sbx_arg_index], **kw)
        servers.append(s)
        return s

    probe = Server(sys.argv[sbx_arg_index], tag="probe")
    shutil.rmtree(probe.tmp, ignore_errors=True)
    if need_execd and not probe.execd_present():
        print("SKIP: sbx-execd is not built next to %s (the process provider needs it)"
              % probe.sbx)
        sys.exit(SKIP)
    try:
        test(factory)
    except Skip as e:
        print("SKIP: %s" % e)
        for s in servers:
            s.cleanup()
        sys.exit(SKIP)
    except Exception:
        traceback.print_exc()
        for s in servers:
            print("---- server log (%s) ----\n%s" % (s.tmp, s.log()))
        for s in servers:
            s.cleanup()
        sys.exit(1)
    for s in servers:
        s.cleanup()
    print("ok")
    sys.exit(0)


def remove_bridge(sbx, bridge, subnet):
    """Remove a test's own bridge network: its leaf bridges and their uplinks (`sbx net gc`,
    once the sandboxes' ports are gone: the kernel deletes them with their namespaces, in the
    background), its rules, its keep-alive port, the bridge and its leases."""
    deadline = time.time() + 10
    while True:
        subprocess.run([sbx, "net", "gc", "--bridge", bridge, "--subnet", subnet],
                       capture_output=True)
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True,
                               text=True).stdout
        if (" %s." % bridge) not in links or time.time() > deadline:
            break
        time.sleep(0.2)
    subprocess.run([sbx, "net", "nft", "teardown", bridge, subnet], capture_output=True)
    subprocess.run(["ip", "link", "del", bridge + "-kp"], capture_output=True)
    subprocess.run(["ip", "link", "del", bridge], capture_output=True)
    subprocess.run(["rm", "-rf", "/run/sbx/net/" + bridge], capture_output=True)


def wait_for(fn, what, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.1)
    raise Fail("timed out waiting for " + what)


def quote(s):
    return urllib.parse.quote(s, safe="")
