#!/usr/bin/env python3
"""What a server's native sandbox must not reach, tried from inside real sandboxes (issue 18):

- the host's device nodes: usable, never changeable (`chmod 0660 /dev/full` inside once changed
  the host's /dev/full);
- execd as PID 1: its memory, environment (the access token) and fds are closed to the
  sandbox's processes, and no host file is behind its stdout (a log file in the state dir was
  writable through /proc/1/fd/1 past every limit); its log and the entrypoint's output are a
  bounded ring served by GET /logs;
- a full /dev/shm in a small sandbox: the command fails, execd (PID 1) and the sandbox live;
- a chroot escape by the sandbox's root (CAP_SYS_CHROOT) ends in the sandbox's own root, and
  the root is stacked on the template mount namespace's read-only tmpfs (no pivot_root per
  sandbox);
- sandboxes of network `none` share the template's read-only sysfs (only `lo`), not the
  host's, and a bridged sandbox keeps its own;
- the network (issue 16), on a bridge of this test's own with two sandboxes per leaf bridge: a
  listener of the host's (on every address) is out of reach but for the address the operator
  allowed, from every leaf, and sandboxes reach each other only in one group, on one leaf and
  across leaves; a kill -9 and restart of the server keeps that; the next server start removes
  the emptied leaves. (Link-local/metadata, private ranges and the resolver exception are
  tried in tests/integration/net, whose "outside" is a namespace of its own.)

Each check has a control showing the operation itself works where it should."""
import ctypes
import json
import os
import socket
import struct
import subprocess
import threading

from harness import Skip, check, host_address, main, remove_bridge, wait_for

CONFIG = 'providers = { supported = ["native"]; default = "native"; };\n'


def inside(s, sid, cmd, timeout=60):
    """(stdout lines, stderr lines, exit code or None) of a command through the router."""
    _, events = s.run(sid, cmd, timeout=timeout)
    out = [e["text"] for e in events if e["type"] == "stdout"]
    err = [e["text"] for e in events if e["type"] == "stderr"]
    code = 0
    for e in events:
        if e["type"] == "error":
            ev = e.get("error", {})
            code = int(ev.get("evalue", "1")) if str(ev.get("evalue", "")).isdigit() else 1
    return out, err, code


def execd_pid(s, sid):
    with open(os.path.join(s.state, "run", sid, "state.json")) as f:
        return json.load(f)["pid"]


def host_devices(s, sid):
    """Each attempt sets what is there already (mode, owner, times): EROFS where the boundary
    holds, harmless where a regression lets it through (the test must not break its host);
    the host's inodes are compared before and after all the same."""
    before = {n: os.stat("/dev/" + n) for n in ("null", "full", "zero", "tty")}
    script = ("chmod %o /dev/full; chmod %o /dev/null; chown %d:%d /dev/zero; "
              "touch -h -r /dev/tty /dev/tty; chmod %o /proc/self/fd/0; "
              "echo ok > /dev/null && echo wrote"
              % (before["full"].st_mode & 0o7777, before["null"].st_mode & 0o7777,
                 before["zero"].st_uid, before["zero"].st_gid, before["null"].st_mode & 0o7777))
    out, err, _ = inside(s, sid, script)
    after = {n: os.stat("/dev/" + n) for n in before}
    for n in before:
        b, a = before[n], after[n]
        if (b.st_mode, b.st_uid, b.st_gid, b.st_mtime_ns) != (a.st_mode, a.st_uid, a.st_gid,
                                                              a.st_mtime_ns):
            os.chown("/dev/" + n, b.st_uid, b.st_gid)  # put the host right before failing
            os.chmod("/dev/" + n, b.st_mode & 0o7777)
            check(False, "the host's /dev/%s changed from inside a sandbox" % n)
    check(out == ["wrote"], "the devices still work: %r" % out)
    refused = [x for x in err if "Read-only file system" in x]
    check(len(refused) == 5, "every change refused with EROFS: %r" % err)


def host_image_secrets(s, sid):
    """The host image binds /etc/ssl/certs only: a key in the host's /etc/ssl/private (a
    marker the test puts there) is not in the sandbox, the CA bundle is."""
    marker = "/etc/ssl/private/sbx-isolation-test-%d.key" % os.getpid()
    made = os.path.isdir("/etc/ssl/private")
    if made:
        with open(marker, "w") as f:
            f.write("marker-private-key\n")
    try:
        out, err, _ = inside(s, sid, "cat /etc/ssl/private/*.key; ls /etc/ssl; "
                                     "test -r /etc/ssl/certs/ca-certificates.crt && echo CA-OK")
    finally:
        if made:
            os.unlink(marker)
    check("marker-private-key" not in out, "a host TLS key is readable: %r" % out)
    check("private" not in out and "CA-OK" in out, "/etc/ssl holds only certs: %r" % out)


CLIMB = """import os
os.makedirs("/tmp/jail", exist_ok=True)
fd = os.open("/", os.O_RDONLY)
os.chroot("/tmp/jail")
os.fchdir(fd)
for _ in range(64):
    os.chdir("..")
os.chroot(".")
print(sorted(os.listdir("/")))
print(os.path.exists(%r))
"""

# statmount(2) and listmount(2) (Linux 6.8; x86_64 numbers: the build host's headers may be
# older): the mounts of a namespace, including those below the caller's root.
SYS_STATMOUNT, SYS_LISTMOUNT = 457, 458
LSMT_ROOT = 0xFFFFFFFFFFFFFFFF
TMPFS_MAGIC, SB_RDONLY = 0x01021994, 1


def statmount(libc, mnt_id):
    """(id, parent id, superblock magic, superblock flags) of a mount."""
    req = struct.pack("=IIQQ", 24, 0, mnt_id, 0x1 | 0x2)  # STATMOUNT_SB_BASIC | MNT_BASIC
    buf = ctypes.create_string_buffer(4096)
    if libc.syscall(SYS_STATMOUNT, ctypes.c_char_p(req), buf, 4096, 0) < 0:
        raise OSError(ctypes.get_errno(), "statmount")
    magic, flags = struct.unpack_from("=QI", buf.raw, 24)
    mid, parent = struct.unpack_from("=QQ", buf.raw, 40)
    return mid, parent, magic, flags


def below_root(pid):
    """In a child that joins pid's mount namespace: what its root mount is stacked on, as
    [(magic, flags), ...] from the root's parent down to the namespace's own root."""
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        out = []
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.syscall.restype = ctypes.c_long
            fd = os.open("/proc/%d/ns/mnt" % pid, os.O_RDONLY)
            if libc.setns(fd, 0x00020000) != 0:  # CLONE_NEWNS: lands in pid's root
                raise OSError(ctypes.get_errno(), "setns")
            ids = (ctypes.c_uint64 * 1)()
            req = struct.pack("=IIQQ", 24, 0, LSMT_ROOT, 0)
            if libc.syscall(SYS_LISTMOUNT, ctypes.c_char_p(req), ids, 1, 0) != 1:
                raise OSError(ctypes.get_errno(), "listmount")
            m = statmount(libc, ids[0])  # the mount at our root
            while m[1] != m[0]:
                m = statmount(libc, m[1])
                out.append([m[2], m[3]])
        except OSError as e:
            out = [str(e)]
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        got = json.loads(f.read() or "[]")
    os.waitpid(child, 0)
    return got


def chroot_climb(s, sid):
    """The classic chroot escape, as root with CAP_SYS_CHROOT (kept by default): keep a dir
    fd, chroot deeper, fchdir back out, climb, chroot there. The climb ends in the sandbox's
    own root, and nothing of the host (a marker in the server's state dir) is on the way. The
    server moves each root into its template mount namespace instead of a pivot_root per
    sandbox (runtime/template.c): below the root there is the template's empty tmpfs, read-only
    at its superblock (then, on a host whose own "/" is stacked on an initramfs, that rootfs,
    as under any pivot_root), which no path reaches."""
    marker = os.path.join(s.state, "host-only-marker")
    with open(marker, "w") as f:
        f.write("secret\n")
    own, _, _ = inside(s, sid, "python3 -c 'import os; print(sorted(os.listdir(\"/\")))'")
    out, err, _ = inside(s, sid, "python3 -c '%s'" % (CLIMB % marker).replace("'", "'\\''"))
    check(len(own) == 1 and "'usr'" in own[0] and out == [own[0], "False"],
          "the climb out of a chroot ends in the sandbox's own root: %r %r (own: %r)"
          % (out, err, own))
    below = below_root(execd_pid(s, sid))
    if below and isinstance(below[0], str) and "Function not implemented" in below[0]:
        print("no statmount(2) here (before Linux 6.8): what is below the root not checked")
        return
    check(below and below[0] == [TMPFS_MAGIC, SB_RDONLY],
          "the sandbox's root is stacked on the template's read-only tmpfs: %r" % below)


SYSFS_MAGIC = "62656572"
SYS_PROBE = ("stat -f -c %t /sys; stat -c %d /sys; ls /sys/class/net | tr '\\n' ' '; echo; "
             "for d in /sys/firmware /proc/acpi; do [ -d $d ] || continue; ls -A $d | wc -l; "
             "touch $d/x 2>&1 | grep -c Read-only; done")


def sys_of(s, sid):
    """(file system type, device, interfaces, [(files, refused writes) of each masked dir])."""
    out, err, _ = inside(s, sid, SYS_PROBE)
    check(len(out) >= 5 and len(out) % 2 == 1, "the /sys probe ran: %r %r" % (out, err))
    masks = [(int(out[i]), int(out[i + 1])) for i in range(3, len(out), 2)]
    return out[0], int(out[1]), out[2].split(), masks


def sysfs_none(new_server, bridged):
    """Sandboxes of network `none` share one read-only sysfs, the template's (runtime/
    template.c: a network namespace with only `lo`), instead of a superblock each, which the
    kernel finds by a walk of every sysfs superblock on the host. It is not the host's sysfs
    (whose network namespace has the host's interfaces) nor a bridged sandbox's (which has its
    own: eth0). The masked directories are the template's empty directory, read-only."""
    s = new_server(config_text='providers = { supported = ["native"]; default = "native";\n'
                               '  native = { network = "none"; }; };\n', tag="isolation-none")
    s.start_native()
    ids = []
    for _ in range(2):
        r = s.create()
        check(r.status == 202, "create: %r" % r)
        ids.append(r.json()["id"])
    a, b = sys_of(s, ids[0]), sys_of(s, ids[1])
    check(a[0] == SYSFS_MAGIC and a[2] == ["lo"], "/sys is a sysfs with only lo: %r" % (a,))
    check(a[1] == b[1], "two sandboxes of network none share one sysfs: %r %r" % (a, b))
    check(a[1] != os.stat("/sys").st_dev, "it is not the host's sysfs: %r" % (a,))
    check(a[1] != bridged[1] and "eth0" in bridged[2],
          "a bridged sandbox has its own, with its eth0: %r %r" % (a, bridged))
    check(all(m == (0, 1) for m in a[3] + bridged[3]),
          "masked dirs are empty and read-only: %r %r" % (a, bridged))
    out, err, _ = inside(s, ids[0], "touch /sys/x 2>&1; cat /sys/class/net/lo/operstate")
    check(any("Read-only" in x for x in out) and out[-1] == "unknown",
          "read-only, and lo is up as in the sandbox's own namespace: %r %r" % (out, err))
    # No cgroupfs inside (the server reuses deleted sandboxes' cgroups, docs/security.md: what
    # one leaves in them must not be readable by the next): /sys/fs/cgroup is empty, mounting
    # one is refused
    out, err, _ = inside(s, ids[0], "ls -A /sys/fs/cgroup | wc -l; mkdir -p /tmp/cg; "
                                    "mount -t cgroup -o memory none /tmp/cg; echo v1=$?; "
                                    "mount -t cgroup2 none /tmp/cg; echo v2=$?")
    check(out[:1] == ["0"] and "v1=0" not in out and "v2=0" not in out and len(out) == 3,
          "no cgroupfs in a sandbox, and none can be mounted: %r %r" % (out, err))
    # The template's network namespace outlives the server that made it (its sandboxes' copies
    # of the template hold it): after a kill -9 and a restart, lo is still in their /sys.
    s.kill9()
    s.start()
    again = sys_of(s, ids[0])
    check(again[1] == a[1] and again[2] == ["lo"], "after a restart: %r %r" % (a, again))
    r = s.create()
    check(r.status == 202, "create after the restart: %r" % r)
    ids.append(r.json()["id"])
    new = sys_of(s, ids[-1])
    check(new[0] == SYSFS_MAGIC and new[2] == ["lo"], "the new server's template: %r" % (new,))
    for sid in ids:
        check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    check(s.stop() == 0, "clean stop")


def pid1_closed(s, sid):
    out, err, _ = inside(s, sid, "cat /proc/1/environ; cat /proc/1/mem; readlink -v /proc/1/fd/1; "
                                 "head -c 1048576 /dev/zero >> /proc/1/fd/1; "
                                 "readlink -v /proc/1/exe; cat /proc/self/environ >/dev/null && "
                                 "echo self-ok")
    check(out == ["self-ok"], "control: a process reads its own environ: %r %r" % (out, err))
    denied = [x for x in err if "Permission denied" in x]
    check(len(denied) == 5, "PID 1's environ, mem, fds, exe are closed: %r" % err)
    pid = execd_pid(s, sid)
    # From the host: what is behind execd's stdio is the sandbox's /dev/null, not a host file.
    for fd in (0, 1, 2):
        target = os.readlink("/proc/%d/fd/%d" % (pid, fd))
        check(target == "/dev/null", "execd's fd %d is %r" % (fd, target))
    check(not os.path.exists(os.path.join(s.state, "native-logs")), "no log dir on the host")
    with open("/proc/%d/environ" % pid, "rb") as f:
        environ = f.read()
    check(b"EXECD_ACCESS_TOKEN=" in environ, "control: the token's variable was there")
    token_bytes = environ.split(b"EXECD_ACCESS_TOKEN=", 1)[1].split(b"\0", 1)[0]
    check(token_bytes == b"", "the token is wiped from execd's environ block")


def lost(s):
    """A native sandbox whose execd dies is noticed (through its pidfd, which the server
    watches instead of asking every sandbox's status in turn): Failed, SANDBOX_LOST."""
    r = s.create()
    check(r.status == 202, "create: %r" % r)
    sid = r.json()["id"]
    check(inside(s, sid, "echo up")[0] == ["up"], "it runs")
    os.kill(execd_pid(s, sid), 9)
    st = wait_for(lambda: (lambda x: x if x["state"] == "Failed" else None)(
        s.request("GET", "/v1/sandboxes/" + sid).json()["status"]), "Failed", timeout=15)
    check(st["reason"] == "SANDBOX_LOST", "reason: %r" % st)
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete the lost one")


def logs(s):
    """The entrypoint's output goes to execd's ring: GET /logs (through the router) has its
    end, bounded, the start dropped."""
    ep = ["/bin/sh", "-c", "echo EP-BEGIN; head -c 2000000 /dev/zero | tr '\\0' y; echo; "
                           "echo EP-DONE; exec sleep 3600"]
    r = s.create(entrypoint=ep)
    check(r.status == 202, "create: %r" % r)
    sid = r.json()["id"]
    body = b""
    for _ in range(100):
        r = s.request("GET", "/sandboxes/%s/proxy/44772/logs" % sid)
        check(r.status == 200, "GET /logs: %r" % r)
        body = r.body
        if b"EP-DONE" in body:
            break
    check(b"EP-DONE" in body, "the entrypoint's output is in the log: %r" % body[-200:])
    check(len(body) <= 256 * 1024, "bounded: %d bytes" % len(body))
    check(b"EP-BEGIN" not in body, "the oldest output dropped first")
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")


def shm_full(s):
    r = s.create(resourceLimits={"cpu": "1", "memory": "64Mi"})
    check(r.status == 202, "create with 64Mi: %r" % r)
    sid = r.json()["id"]
    out, _, _ = inside(s, sid, "df -k /dev/shm | tail -1 | awk '{print $2}'")
    check(out and int(out[0]) <= 32 * 1024, "/dev/shm is half the memory limit: %r" % out)
    out, err, _ = inside(s, sid, "dd if=/dev/zero of=/dev/shm/fill bs=1M count=200 2>&1 | "
                                 "grep -o 'No space left on device'; ls -s /dev/shm/fill")
    check(any("No space left" in x for x in out + err), "filling /dev/shm stops at its size: "
          "%r %r" % (out, err))
    # Memory with /dev/shm full: the hog dies, not execd.
    inside(s, sid, "tail /dev/zero", timeout=120)
    # execd holds +500 for the moment of a posix_spawn (spawn.c): the shell it starts may run
    # before execd is back to 0 on a loaded machine, so look a little later
    out, _, _ = inside(s, sid, "sleep 0.5; cat /proc/1/oom_score_adj; "
                               "cat /proc/self/oom_score_adj; echo alive")
    check(out == ["0", "500", "alive"], "execd survives, its children go first: %r" % out)
    got = s.request("GET", "/v1/sandboxes/" + sid).json()
    check(got["status"]["state"] == "Running", "the sandbox lives: %r" % got)
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")


class Listener:
    """A TCP listener of the host's on 0.0.0.0, counting connections."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            c.sendall(b"host-secret\n")
            c.close()


def connect_cmd(addr, port):
    """Shell that prints what addr:port answered, or the error, in at most 3 s."""
    return ("timeout 3 bash -c 'exec 3<>/dev/tcp/%s/%d && head -c 64 <&3' 2>&1 || echo refused"
            % (addr, port))


def sandbox_addr(s, sid):
    out, _, _ = inside(s, sid, "ip -4 -o addr show eth0 | awk '{print $4}'")
    return out[0].split("/")[0]


def leaf_ports(leaf):
    """Names of the ports of a leaf bridge (host side)."""
    out = subprocess.run(["ip", "-o", "link", "show", "master", leaf], capture_output=True,
                         text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def veth_of(addr):
    a, b, c, d = (int(x) for x in addr.split("."))
    return "vsbx%02x%02x%02x%02x" % (a, b, c, d)


def reach(s, ids, addrs, host, gateway, lis):
    """Isolation across and within leaves (a, c on leaf 1; b, d on leaf 2; c, d one group)
    and the host from every leaf."""
    hits = lis.hits
    for name in ("a", "b"):
        out, _, _ = inside(s, ids[name], connect_cmd(gateway, lis.port))
        check("host-secret" not in " ".join(out),
              "the host's listener through the gateway from %s: %r" % (name, out))
        out, _, _ = inside(s, ids[name], connect_cmd(host, lis.port))
        check("host-secret" in " ".join(out),
              "the allowed host address answers %s: %r" % (name, out))
    check(lis.hits == hits + 2, "the host's listener was reached through the gateway")
    # sandboxes: each answers on its own address (the control); a and b on two leaves, a and
    # c on one leaf, are out of each other's reach; c and d (one group, two leaves) talk
    for name in ids:
        out, _, _ = inside(s, ids[name], connect_cmd("127.0.0.1", 7070))
        check("from-" + name in " ".join(out), "%s serves: %r" % (name, out))
    for src, dst in (("a", "b"), ("b", "a"), ("a", "c"), ("a", "d"), ("b", "c")):
        out, _, _ = inside(s, ids[src], connect_cmd(addrs[dst], 7070))
        check("from-" + dst not in " ".join(out), "%s reached %s: %r" % (src, dst, out))
    for src, dst in (("c", "d"), ("d", "c")):
        out, _, _ = inside(s, ids[src], connect_cmd(addrs[dst], 7070))
        check("from-" + dst in " ".join(out), "%s and %s share a group: %r" % (src, dst, out))
    # the router still reaches every sandbox (provider.connect, not the bridge)
    for sid in ids.values():
        check(inside(s, sid, "echo up")[0] == ["up"], "router to %s" % sid)


def serving(s, name, ext):
    """A sandbox that serves its name on 7070 (its entrypoint, so it outlives any command)."""
    serve = ("import socket\ns=socket.socket()\ns.bind(('0.0.0.0',7070))\ns.listen()\n"
             "while True:\n c,_=s.accept()\n c.sendall(b'from-%s')\n c.close()\n" % name)
    r = s.create(extensions=ext, entrypoint=["python3", "-c", serve])
    check(r.status == 202, "create %s: %r" % (name, r))
    return r.json()["id"]


def network(new_server):
    """Two sandboxes per leaf bridge (leaf_size = 2; no namespace pool, so the leases go in
    order): a, c on leaf 1, b, d on leaf 2 (issue 16, "More than 1022 bridged sandboxes")."""
    tag = os.getpid() % 200 + 20
    bridge = "sbxiso%d" % tag
    subnet = "10.231.%d.0/24" % tag
    gateway = "10.231.%d.1" % tag
    host = host_address()
    if not host:
        raise Skip("no non-loopback address on this host")
    config = ('providers = { supported = ["native"]; default = "native";\n'
              '  native = { bridge = "%s"; subnet = "%s"; network_allow = ["%s"];\n'
              '             leaf_size = 2; netns_pool = 0; }; };\n'
              % (bridge, subnet, host))
    s = new_server(config_text=config, tag="isolation-net")
    s.start()
    lis = Listener()
    try:
        ids = {}
        for name, ext in (("a", {}), ("c", {"sbx.network.group": "pair"}), ("b", {}),
                          ("d", {"sbx.network.group": "pair"})):
            ids[name] = serving(s, name, ext)
        addrs = {k: sandbox_addr(s, v) for k, v in ids.items()}
        check(all(a.startswith("10.231.%d." % tag) for a in addrs.values()),
              "on the test's bridge: %r" % addrs)
        one, two = leaf_ports(bridge + ".1"), leaf_ports(bridge + ".2")
        check({veth_of(addrs["a"]), veth_of(addrs["c"])} <= one and
              {veth_of(addrs["b"]), veth_of(addrs["d"])} <= two,
              "a, c on leaf 1 and b, d on leaf 2: %r %r %r" % (addrs, one, two))
        reach(s, ids, addrs, host, gateway, lis)
        r = s.create(extensions={"sbx.network.group": "../bad"})
        check(r.status == 400 and "sbx.network.group" in r.json()["message"],
              "a bad group name is a 400 naming the key: %r" % r)
        # a restart (kill -9) keeps them on their leaves, working; the next one makes leaf 3
        s.kill9()
        s.start()
        check(leaf_ports(bridge + ".1") == one and leaf_ports(bridge + ".2") == two,
              "the leaves are as they were")
        reach(s, ids, addrs, host, gateway, lis)
        e = serving(s, "e", {})
        addr_e = sandbox_addr(s, e)
        check(veth_of(addr_e) in leaf_ports(bridge + ".3"), "e on leaf 3: %r" % addr_e)
        out, _, _ = inside(s, e, connect_cmd(host, lis.port))
        check("host-secret" in " ".join(out), "the allowed host address answers e: %r" % out)
        out, _, _ = inside(s, e, connect_cmd(addrs["d"], 7070))
        check("from-d" not in " ".join(out), "e reached d: %r" % out)
        for sid in list(ids.values()) + [e]:
            check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
        check(s.stop() == 0, "clean stop")
        # the next server start's gc (the runtime's, as `sbx gc` does) removes the emptied
        # leaves with their uplinks, once their ports are gone (the kernel deletes them with
        # the sandboxes' namespaces, in the background)
        wait_for(lambda: not any(p.startswith("vsbx") for k in (1, 2, 3)
                                 for p in leaf_ports("%s.%d" % (bridge, k))),
                 "the sandboxes' ports to go", 30)
        s.start()
        gone = all(subprocess.run(["ip", "link", "show", "%s.%d" % (bridge, k)],
                                  capture_output=True).returncode != 0 for k in (1, 2, 3))
        check(gone, "a server start removes the empty leaves")
        check(s.stop() == 0, "clean stop")
        out = subprocess.run(["ip", "-o", "link", "show", "master", bridge], capture_output=True,
                             text=True).stdout
        check("usbx" not in out, "their uplinks went with them: %r" % out)
    finally:
        lis.sock.close()
        s.kill9()
        s.gc_runtime()
        remove_bridge(s.sbx, bridge, subnet)


def test(new_server):
    s = new_server(config_text=CONFIG, tag="isolation")
    s.start_native()
    r = s.create()
    if r.status != 202:
        raise Skip("the runtime cannot make sandboxes on this host: %r" % r)
    sid = r.json()["id"]
    host_devices(s, sid)
    host_image_secrets(s, sid)
    chroot_climb(s, sid)
    pid1_closed(s, sid)
    bridged = sys_of(s, sid)
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    lost(s)
    logs(s)
    shm_full(s)
    check(s.stop() == 0, "clean stop")
    sysfs_none(new_server, bridged)
    network(new_server)


if __name__ == "__main__":
    main(test)
