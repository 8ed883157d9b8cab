"""A private Docker Engine for the docker provider's tests: a real `dockerd` (Debian's docker.io)
or `podman system service` (Debian's podman), each with its own socket, data and run dirs under
a temp dir, plus a real `docker-registry` on loopback holding a BusyBox image pushed by skopeo
(no Docker Hub here). Everything is stopped by PID; the host is left as it was found: no
bridge (dockerd runs with --bridge=none --iptables=false), no iptables change, no mount, no
cgroup left.

As a module: Engine(kind).start() / .stop(); as a program, a wrapper for shell tests:

  engine.py run [--engine dockerd|podman|any] -- CMD...
      starts an engine (the preferred one, else the other), runs CMD with SBX_DOCKER_SOCKET,
      SBX_DOCKER_ENGINE, SBX_DOCKER_CGROUP and SBX_IMAGE set, stops it; exit 77 when neither
      engine can start.
"""
import hashlib
import http.client
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse

SKIP = 77
IMAGE_REPO = "sbx-test/busybox"


class EngineError(Exception):
    pass


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__("docker", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def api(sock, method, path, body=None, timeout=120):
    """One Engine API call; returns (status, parsed JSON or raw bytes)."""
    c = UnixHTTP(sock, timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        c.request(method, "/v1.41" + path, body=data, headers=headers)
        r = c.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw) if raw else None
        except ValueError:
            return r.status, raw
    finally:
        c.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def stop_pid(proc, what, timeout=60, via_child=False):
    """SIGTERM (to the child when proc is an `unshare --fork` wrapper), wait, else SIGKILL."""
    if proc is None or proc.poll() is not None:
        return
    targets = children(proc.pid) if via_child else []
    if targets:
        for c in targets:
            os.kill(c, signal.SIGTERM)
    else:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        print("%s (pid %d) ignored SIGTERM for %d s: SIGKILL" % (what, proc.pid, timeout))
        proc.kill()
        proc.wait()


def cgroup_roots():
    """The cgroup hierarchies' mount points (v1 controllers and the v2 mount)."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            fstype = fields[fields.index("-") + 1]
            if fstype in ("cgroup", "cgroup2"):
                out.append(fields[4])
    return out


def host_facts():
    """What a container engine could change on the host and must change back."""
    facts = {}
    r = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True)
    facts["forward policy"] = r.stdout.splitlines()[0] if r.returncode == 0 and r.stdout else ""
    with open("/proc/sys/net/ipv4/ip_forward") as f:
        facts["ip_forward"] = f.read().strip()
    for d in ("/etc/docker", "/etc/cni/net.d", "/etc/containers/networks"):
        facts[d] = sorted(os.listdir(d)) if os.path.isdir(d) else None
    memcg = "/sys/fs/cgroup/memory"
    if os.path.isdir(memcg):
        facts["engine cgroups"] = sorted(n for n in os.listdir(memcg) if n in (
            "docker", "libpod_parent") or n.startswith("sbx-test-"))
    links = os.listdir("/sys/class/net")
    facts["docker links"] = sorted(n for n in links if n == "docker0" or n.startswith("br-")
                                   or n == "cni-podman0" or n == "podman0")
    return facts


class Registry:
    """docker-registry on a free loopback port, holding the test image."""

    def __init__(self, tmp):
        self.dir = os.path.join(tmp, "registry")
        self.proc = None
        self.port = 0
        self.extra = ""  # more registry config (e.g. auth)

    def start(self):
        if not shutil.which("docker-registry") or not shutil.which("skopeo"):
            raise EngineError("docker-registry and skopeo are needed (scripts/deps.sh)")
        os.makedirs(self.dir, exist_ok=True)
        for _ in range(3):
            self.port = free_port()
            cfg = os.path.join(self.dir, "config.yml")
            with open(cfg, "w") as f:
                f.write("version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n"
                        "storage:\n  filesystem:\n    rootdirectory: %s/data\n"
                        "http:\n  addr: 127.0.0.1:%d\n%s" % (self.dir, self.port, self.extra))
            log = open(os.path.join(self.dir, "log"), "ab")
            self.proc = subprocess.Popen(["docker-registry", "serve", cfg], stdout=log,
                                         stderr=subprocess.STDOUT)
            log.close()
            for _ in range(300):
                if self.proc.poll() is not None:
                    break
                try:
                    c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                    c.request("GET", "/v2/")
                    if c.getresponse().status in (200, 401) and self.proc.poll() is None:
                        return
                except OSError:
                    pass
                time.sleep(0.1)
            stop_pid(self.proc, "docker-registry")
        raise EngineError("docker-registry did not start")

    def stop(self):
        stop_pid(self.proc, "docker-registry")

    def push_busybox(self, tag="1", creds=None, shell=True, extra=()):
        """A BusyBox image (static busybox + applet links + /tmp) pushed with skopeo; returns
        its reference. shell=False: only /busybox (no /bin/sh). extra: more entries, each
        (path, bytes) for a file or (path, "->target") for a symlink (parents made)."""
        busybox = "/bin/busybox"
        if not os.access(busybox, os.X_OK):
            raise EngineError("%s is missing (busybox-static, scripts/deps.sh)" % busybox)
        applets = subprocess.run([busybox, "--list"], capture_output=True, text=True,
                                 check=True).stdout.split()
        layer = io.BytesIO()
        with tarfile.open(fileobj=layer, mode="w") as t:
            def add_dir(name, mode=0o755):
                ti = tarfile.TarInfo(name)
                ti.type, ti.mode = tarfile.DIRTYPE, mode
                t.addfile(ti)
            for d in ("bin", "etc", "root", "tmp"):
                add_dir(d, 0o1777 if d == "tmp" else 0o755)
            t.add(busybox, "bin/busybox" if shell else "busybox")
            for a in applets if shell else []:
                if a != "busybox":
                    ti = tarfile.TarInfo("bin/" + a)
                    ti.type, ti.linkname = tarfile.SYMTYPE, "busybox"
                    t.addfile(ti)
            made = {"bin", "etc", "root", "tmp"}
            for path, what in extra:
                parts = path.split("/")[:-1]
                for i in range(len(parts)):
                    if "/".join(parts[:i + 1]) not in made:
                        made.add("/".join(parts[:i + 1]))
                        add_dir("/".join(parts[:i + 1]))
                ti = tarfile.TarInfo(path)
                if isinstance(what, str):
                    ti.type, ti.linkname = tarfile.SYMTYPE, what[2:]
                    t.addfile(ti)
                else:
                    ti.size = len(what)
                    t.addfile(ti, io.BytesIO(what))
            passwd = b"root:x:0:0:root:/root:/bin/sh\n"
            ti = tarfile.TarInfo("etc/passwd")
            ti.size = len(passwd)
            t.addfile(ti, io.BytesIO(passwd))
        archive = os.path.join(self.dir, "busybox.tar")
        ldata = layer.getvalue()
        lhash = hashlib.sha256(ldata).hexdigest()
        config = json.dumps({"architecture": "amd64", "os": "linux",
                             "config": {"Env": ["PATH=/bin"], "Cmd": ["sh"]},
                             "rootfs": {"type": "layers", "diff_ids": ["sha256:" + lhash]}})
        chash = hashlib.sha256(config.encode()).hexdigest()
        with tarfile.open(archive, "w") as t:
            for name, data in ((lhash + ".tar", ldata), (chash + ".json", config.encode()),
                               ("manifest.json", json.dumps([{
                                   "Config": chash + ".json", "RepoTags": ["x/y:1"],
                                   "Layers": [lhash + ".tar"]}]).encode())):
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
        ref = "127.0.0.1:%d/%s:%s" % (self.port, IMAGE_REPO, tag)
        argv = ["skopeo", "copy", "-q", "--dest-tls-verify=false"]
        if creds:
            argv += ["--dest-creds", creds]
        subprocess.run(argv + ["docker-archive:" + archive, "docker://" + ref], check=True,
                       capture_output=True, timeout=120)
        return ref


class Engine:
    """A private dockerd or podman service. .socket, .kind, .cgroup_parent."""

    def __init__(self, kind, tmp, pidns=False, name=None):
        self.kind = kind
        # pidns: the engine runs in a pid namespace of its own (as a daemon on another host
        # or in a container would): the container pids it reports are not this host's.
        self.pidns = pidns
        self.dir = os.path.join(tmp, name or kind)
        self.socket = os.path.join(self.dir, "engine.sock")
        self.proc = None
        self.registry_ports = []
        self.image = None
        # Containers go below a cgroup of the test's own, removed at the end.
        self.cgroup_parent = "sbx-test-%s-%d" % (kind, os.getpid())
        self.cgroups_before = None

    def log(self):
        try:
            with open(os.path.join(self.dir, "log"), errors="replace") as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def _argv(self):
        d = self.dir
        if self.kind == "dockerd":
            # Its identity key, else written to /etc/docker/key.json. A daemon.json key only:
            # dockerd 20.10 has no command-line flag for it.
            with open(os.path.join(d, "daemon.json"), "w") as f:
                json.dump({"deprecated-key-path": os.path.join(d, "key.json")}, f)
            # No bridge, no iptables, no forwarding: dockerd must not touch the host's network
            # (it would set the FORWARD policy to DROP and leave docker0 behind).
            return ["dockerd", "-H", "unix://" + self.socket, "--config-file",
                    os.path.join(d, "daemon.json"), "--data-root", os.path.join(d, "data"),
                    "--exec-root", os.path.join(d, "exec"), "--pidfile",
                    os.path.join(d, "dockerd.pid"),
                    "--bridge=none", "--iptables=false",
                    "--ip-forward=false", "--ip-masq=false", "--userland-proxy=false",
                    "--log-level=warn"], os.environ.copy()
        conf = os.path.join(d, "containers.conf")
        with open(conf, "w") as f:
            # Root here lacks CAP_SYS_RESOURCE: container rlimits must stay under the hard ones.
            # crun 1.8 refuses hybrid cgroups when the v2 mount lists controllers: runc.
            f.write('[containers]\ndefault_ulimits = ["nofile=20000:20000", '
                    '"nproc=32768:32768"]\n[engine]\nruntime = "runc"\n'
                    'cgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
                    'static_dir = "%s/static"\nvolume_path = "%s/volumes"\n'
                    # buildah (podman's commit) reads the network dir from here, not the flag
                    '[network]\nnetwork_config_dir = "%s/networks"\n' % (d, d, d))
        with open(os.path.join(d, "storage.conf"), "w") as f:
            f.write('[storage]\ndriver = "overlay"\ngraphroot = "%s/root"\nrunroot = "%s/run"\n'
                    % (d, d))
        with open(os.path.join(d, "registries.conf"), "w") as f:
            # dockerd treats 127.0.0.0/8 registries as plain HTTP; podman needs telling
            for port in self.registry_ports:
                f.write('[[registry]]\nlocation = "127.0.0.1:%d"\ninsecure = true\n' % port)
        env = os.environ.copy()
        env.update(CONTAINERS_CONF=conf, CONTAINERS_STORAGE_CONF=os.path.join(d, "storage.conf"),
                   CONTAINERS_REGISTRIES_CONF=os.path.join(d, "registries.conf"))
        return ["podman", "--root", os.path.join(d, "root"), "--runroot", os.path.join(d, "run"),
                "--tmpdir", os.path.join(d, "tmp"),
                "--network-config-dir", os.path.join(d, "networks"), "system", "service", "--time=0",
                "unix://" + self.socket], env

    def start(self, registry_ports=()):
        self.registry_ports = list(registry_ports) or self.registry_ports
        binary = "dockerd" if self.kind == "dockerd" else "podman"
        if not shutil.which(binary):
            raise EngineError("%s is not installed (scripts/deps.sh)" % binary)
        os.makedirs(self.dir, exist_ok=True)
        if self.cgroups_before is None:
            self.cgroups_before = {p for p in self._engine_cgroups() if os.path.isdir(p)}
        argv, env = self._argv()
        if self.pidns:
            argv = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"] + argv
        log = open(os.path.join(self.dir, "log"), "ab")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise EngineError("%s exited with %d: %s" % (self.kind, self.proc.returncode,
                                                             self.log()[-600:]))
            try:
                if api(self.socket, "GET", "/version", timeout=5)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise EngineError("%s did not answer on %s within 60 s" % (self.kind, self.socket))

    def containers(self, label=None):
        q = "?all=1"
        if label:
            q += "&filters=" + urllib.parse.quote(json.dumps({"label": [label]}))
        status, body = api(self.socket, "GET", "/containers/json" + q)
        if status != 200:
            raise EngineError("list containers: %d %r" % (status, body))
        return body

    def remove_all(self):
        try:
            for c in self.containers():
                api(self.socket, "DELETE", "/containers/%s?force=1&v=1" % c["Id"])
        except (OSError, EngineError):
            pass

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.remove_all()
        stop_pid(self.proc, self.kind, via_child=self.pidns)
        self.proc = None
        self._wait_stragglers()
        self._unmount_leftovers()
        self._remove_cgroups()

    def _stragglers(self):
        """Processes the engine left running on its dirs: podman's conmon of a container that
        was killed or removed last runs its exit command (`podman container cleanup`, which
        mounts the storage again) after the service is gone."""
        out = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            try:
                with open("/proc/%s/cmdline" % name, "rb") as f:
                    if (self.dir + "/").encode() in f.read():
                        out.append(int(name))
            except OSError:
                pass
        return out

    def _wait_stragglers(self, timeout=30):
        """Wait for the stragglers (else their mounts and cgroups, made after the cleanup,
        stay behind); SIGKILL by PID those still there after timeout."""
        deadline = time.time() + timeout
        while self._stragglers() and time.time() < deadline:
            time.sleep(0.1)
        for pid in self._stragglers():
            print("%s straggler %d still running after %d s: SIGKILL" % (self.kind, pid,
                                                                         timeout))
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def _unmount_leftovers(self):
        """Podman's overlay driver bind-mounts its own dir and keeps it after exit."""
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split()[4] for line in f]
        for m in sorted((m for m in mounts if m.startswith(self.dir + "/")), reverse=True):
            subprocess.run(["umount", m], capture_output=True)

    def _engine_cgroups(self):
        """Cgroups the engine makes besides the containers' parent: podman puts conmon in
        /libpod_parent/conmon whatever the containers' parent is."""
        rel = ["libpod_parent/conmon", "libpod_parent"] if self.kind == "podman" else []
        return [os.path.join(root, r) for root in cgroup_roots() for r in rel]

    def _remove_cgroups(self):
        for root in cgroup_roots():
            path = os.path.join(root, self.cgroup_parent)
            # bottom-up: container cgroups first (empty once the engine removed them)
            for dirpath, _, _ in sorted(os.walk(path), key=lambda w: -len(w[0])):
                try:
                    os.rmdir(dirpath)
                except OSError:
                    pass
        # Only what was not there before; rmdir fails (harmlessly) while another engine uses it.
        for path in self._engine_cgroups():
            if path not in self.cgroups_before:
                try:
                    os.rmdir(path)
                except OSError:
                    pass

    def restart(self):
        """Stop the daemon (containers stay, stopped) and start it again on the same dirs."""
        stop_pid(self.proc, self.kind, via_child=self.pidns)
        self.proc = None
        self.start()

    def down(self):
        """Stop the daemon but keep its dirs (a later restart() brings it back)."""
        stop_pid(self.proc, self.kind, via_child=self.pidns)


class Setup:
    """Registry + image + one engine (preferred kind first, else the other)."""

    def __init__(self, prefer="any"):
        self.tmp = tempfile.mkdtemp(prefix="sbx-dk-", dir="/var/tmp")
        self.registry = Registry(self.tmp)
        self.engine = None
        self.image = None
        self.before = host_facts()
        self.prefer = prefer

    def start(self):
        if os.getuid() != 0:
            raise EngineError("needs root (a container engine)")
        self.registry.start()
        self.image = self.registry.push_busybox()
        kinds = ["dockerd", "podman"]
        if self.prefer == "podman":
            kinds.reverse()
        why = []
        for kind in kinds:
            e = Engine(kind, self.tmp)
            try:
                e.start([self.registry.port])
                self.engine = e
                if kind != self.prefer and self.prefer != "any":
                    print("note: %s could not start (%s); using %s" % (self.prefer,
                                                                       "; ".join(why), kind))
                return
            except EngineError as ex:
                why.append("%s: %s" % (kind, ex))
                e.stop()
        raise EngineError("neither dockerd nor podman could start: " + " | ".join(why))

    def run_test(self, body, prepare=None, cleanup=None):
        """A test on this setup (the tests' harness: Fail, Skip): start it, then prepare()
        (an EngineError of either is a Skip, or a Fail when starting left host changes),
        body(what prepare returned), then cleanup() and stop; host changes left after a
        passing body are a Fail."""
        from harness import Fail, Skip  # pylint: disable=import-outside-toplevel

        try:
            self.start()
            ready = prepare() if prepare else None
        except EngineError as ex:
            left = self.stop()
            if cleanup:
                cleanup()
            if left:
                raise Fail("host changes left behind: %r" % left) from ex
            raise Skip(str(ex)) from ex
        ok = False
        try:
            body(ready)
            ok = True
        finally:
            if cleanup:
                cleanup()
            left = self.stop()
            if ok and left:
                raise Fail("the engine left host changes behind: %r" % left)

    def stop(self):
        """Stop everything; returns a list of host changes left behind (empty when clean)."""
        if self.engine:
            self.engine.stop()
        self.registry.stop()
        after = host_facts()
        left = ["%s: %r -> %r" % (k, self.before[k], after[k]) for k in self.before
                if self.before[k] != after[k]]
        with open("/proc/self/mountinfo") as f:
            left += ["mount " + line.split()[4] for line in f
                     if line.split()[4].startswith(self.tmp + "/")]
        if not left:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return left


def main():
    args = sys.argv[1:]
    if not args or args[0] != "run" or "--" not in args:
        print(__doc__)
        return 2
    prefer = "any"
    if "--engine" in args[:args.index("--")]:
        prefer = args[args.index("--engine") + 1]
    cmd = args[args.index("--") + 1:]
    setup = Setup(prefer)
    try:
        setup.start()
    except EngineError as e:
        left = setup.stop()
        print("SKIP: %s" % e)
        return 1 if left else SKIP
    env = os.environ.copy()
    env.update(SBX_DOCKER_SOCKET=setup.engine.socket, SBX_DOCKER_ENGINE=setup.engine.kind,
               SBX_DOCKER_CGROUP=setup.engine.cgroup_parent, SBX_IMAGE=setup.image)
    print("engine: %s on %s, image %s" % (setup.engine.kind, setup.engine.socket, setup.image))
    sys.stdout.flush()
    try:
        rc = subprocess.run(cmd, env=env).returncode
    finally:
        left = setup.stop()
    if left:
        print("FAIL: the engine left host changes behind: %s" % left)
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
