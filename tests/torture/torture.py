#!/usr/bin/env python3
"""Torture: a real `sbx serve` (native provider, a BusyBox OCI image) under mixed operations from
concurrent clients - create, exec, upload, pause, resume, stop, start, snapshot, delete - killed
with SIGKILL at random points and restarted, with faults injected between rounds: execd killed
inside a sandbox, the SQLite file locked by another process, a full disk under the state dir,
out-of-memory inside a sandbox and in the server's own cgroup, the wall clock stepped back. After every restart (and every fault) the invariants are checked
with the clients held:

  - no sandbox lost: every acknowledged create that was not deleted is listed; no duplicate (each
    create carries a unique metadata tag, so a create whose answer the kill swallowed is found
    too); an acknowledged delete is gone
  - none stuck: no sandbox stays Pending/Pausing/Resuming/Stopping/Starting after the restart
  - every acknowledged operation is reflected: the state after a pause, resume, stop or start;
    the last acknowledged exec's and upload's files in a Running sandbox; acknowledged
    snapshots listed and never left Creating
  - nothing leaked: runtime records, writable layers, bridge leases, veths, network namespaces,
    cgroups and processes belong to listed sandboxes only, but for the cgroups the server
    keeps for its next creates (runtime/cgspare.c: the running server's, at most 32 per
    hierarchy, no process in any); at the end, after deleting everything, nothing is left but
    those, and none after a clean stop.

  torture.py SBX [--ops N] [--kills K] [--clients C] [--faults a,b,...] [--seed S]
Faults: execd, sqlite-lock, disk-full, oom (in a sandbox), server-oom (the server's cgroup), clock
(the host's wall clock stepped back and forth: not in CI's short form, it would disturb other
tests) (default: all). Exit 77 when no native sandbox can be
made here. `make torture` runs the long form; CTest (torture/short) a short one."""
import argparse
import concurrent.futures
import http.client
import os
import random
import sqlite3
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration", "server"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))

import busybox_image  # noqa: E402
from harness import Server, Skip, check, wait_for  # noqa: E402
from test_crash import check_spares, native_footprint  # noqa: E402

IMAGE = "sbx-test/busybox:1"
TRANSIENT = {"Pending", "Pausing", "Resuming", "Stopping", "Starting"}
LIMITS = {"cpu": "1", "memory": "256Mi"}


class Down(Exception):
    """The server did not answer (killed): the operation's outcome is unknown."""


class Model:
    """What the clients know: per create tag, the sandbox id (once known), the state the last
    acknowledged operation left it in, and whether an operation's outcome is unknown."""

    def __init__(self):
        self.lock = threading.Lock()
        self.boxes = {}  # tag -> dict(id, state, unsure, last_exec, upload, owner)
        self.deleted = set()  # ids whose delete was acknowledged
        self.snapshots = {}  # id -> sandbox id, acknowledged
        self.counts = {}

    def count(self, what):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1


class Torture:
    def __init__(self, sbx, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.cg = "sbx-torture-%d" % os.getpid()
        conf = ('providers = { supported = ["native"]; default = "native";\n'
                '  native = { cgroup_parent = "%s"; }; };\n' % self.cg)
        self.s = Server(sbx, config_text=conf, tag="torture")
        self.model = Model()
        self.up = threading.Event()  # the server answers; clients may go on
        self.hold = threading.Event()  # set: clients wait (checks in progress)
        self.ops_left = args.ops
        self.ops_lock = threading.Lock()
        self.tagseq = 0
        self.mounted = False

    # ---- plumbing -------------------------------------------------------------------------
    def req(self, method, path, body=None, raw=None, timeout=60):
        try:
            return self.s.request(method, path, body, raw=raw, timeout=timeout)
        except (OSError, http.client.HTTPException) as e:  # killed mid-answer: IncompleteRead
            raise Down(str(e)) from e

    def start_server(self):
        self.s.start()
        self.up.set()

    def take_op(self):
        with self.ops_lock:
            if self.ops_left <= 0:
                return False
            self.ops_left -= 1
            return True

    def wait_turn(self):
        while self.hold.is_set() or not self.up.is_set():
            time.sleep(0.02)

    # ---- one client's operations ------------------------------------------------------------
    def new_tag(self):
        with self.ops_lock:
            self.tagseq += 1
            return "t%d-%d" % (os.getpid(), self.tagseq)

    def op_create(self, owner):
        tag = self.new_tag()
        box = {"id": None, "state": None, "unsure": True, "last_exec": None, "upload": None,
               "owner": owner}
        with self.model.lock:
            self.model.boxes[tag] = box
        r = self.req("POST", "/v1/sandboxes", {
            "image": {"uri": IMAGE}, "entrypoint": ["sleep", "100000"], "resourceLimits": LIMITS,
            "metadata": {"torture": tag}})
        check(r.status in (202, 429, 500, 503), "create: %r" % r)
        with self.model.lock:
            if r.status == 202:
                box.update(id=r.json()["id"], state="Running", unsure=False)
            else:  # refused (a fault): nothing may exist
                box.update(state="Absent", unsure=True)
        self.model.count("create")

    def op_exec(self, tag, box):
        n = self.rng.randint(1, 10 ** 9)
        box["exec_try"] = n  # a kill may swallow the answer of a command that ran
        r = self.req("POST", "/sandboxes/%s/proxy/44772/command" % box["id"],
                     {"command": "echo %d > /root/last" % n})
        if r.status == 200 and b"execution_complete" in r.body:
            box["last_exec"] = n
        self.model.count("exec")

    def op_upload(self, tag, box):
        data = os.urandom(64).hex().encode()
        box["upload_try"] = data
        boundary = "torture%d" % self.rng.randint(0, 10 ** 9)
        meta = '{"path": "/root/up", "mode": 644}'
        body = ("--%s\r\nContent-Disposition: form-data; name=\"metadata\"; "
                "filename=\"metadata\"\r\nContent-Type: application/json\r\n\r\n%s\r\n"
                "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"up\"\r\n"
                "Content-Type: application/octet-stream\r\n\r\n" % (boundary, meta, boundary)
                ).encode() + data + ("\r\n--%s--\r\n" % boundary).encode()
        try:
            r = self.s.request("POST", "/sandboxes/%s/proxy/44772/files/upload" % box["id"],
                               raw=body, headers={"Content-Type":
                                                  "multipart/form-data; boundary=" + boundary})
        except (OSError, http.client.HTTPException) as e:
            raise Down(str(e)) from e
        if r.status == 200:
            box["upload"] = data
        self.model.count("upload")

    def op_verb(self, tag, box, verb, after):
        box["unsure"] = True
        r = self.req("POST", "/v1/sandboxes/%s/%s" % (box["id"], verb))
        if r.status == 202:
            box["state"] = after
        box["unsure"] = False
        self.model.count(verb)

    def op_snapshot(self, tag, box):
        r = self.req("POST", "/v1/sandboxes/%s/snapshots" % box["id"], timeout=120)
        if r.status == 202:
            with self.model.lock:
                self.model.snapshots[r.json()["id"]] = box["id"]
        self.model.count("snapshot")

    def op_delete(self, tag, box):
        box["unsure"] = True
        r = self.req("DELETE", "/v1/sandboxes/" + box["id"])
        check(r.status in (204, 404, 409, 500), "delete: %r" % r)
        if r.status == 204:
            with self.model.lock:
                self.model.deleted.add(box["id"])
                box.update(state="Absent", unsure=False)
        self.model.count("delete")

    def pick(self, owner):
        with self.model.lock:
            mine = [(t, b) for t, b in self.model.boxes.items()
                    if b["owner"] == owner and b["id"] and b["state"] not in ("Absent", "Failed")
                    and not b["unsure"]]
        if len(mine) < 2 or (len(mine) < 4 and self.rng.random() < 0.15):
            return self.op_create, (owner,), None
        tag, box = self.rng.choice(mine)
        st = box["state"]
        choices = [(self.op_delete, 1)]
        if st == "Running":
            choices += [(self.op_exec, 6), (self.op_upload, 3), (self.op_snapshot, 1),
                        (lambda t, b: self.op_verb(t, b, "pause", "Paused"), 2),
                        (lambda t, b: self.op_verb(t, b, "stop", "Stopped"), 1)]
        elif st == "Paused":
            choices += [(lambda t, b: self.op_verb(t, b, "resume", "Running"), 4),
                        (self.op_snapshot, 1)]
        elif st == "Stopped":
            choices += [(lambda t, b: self.op_verb(t, b, "start", "Running"), 4)]
        fns = [f for f, w in choices for _ in range(w)]
        return self.rng.choice(fns), (tag, box), box

    def client(self, owner):
        while self.take_op():
            self.wait_turn()
            fn, a, box = self.pick(owner)
            try:
                fn(*a)
            except Down:
                # the outcome is unknown: the check after the restart settles it
                if box:
                    box["unsure"] = True
                self.wait_turn()

    # ---- the checks -------------------------------------------------------------------------
    def listing(self):
        out, page = [], 1
        while True:
            r = self.req("GET", "/v1/sandboxes?pageSize=200&page=%d" % page)
            check(r.status == 200, "list: %r" % r)
            j = r.json()
            out += j["items"]
            if not j["pagination"]["hasNextPage"]:
                return out
            page += 1

    def settle(self):
        """No sandbox in a transient state (the restart's reconcile ends them)."""
        def calm():
            return not [x for x in self.listing() if x["status"]["state"] in TRANSIENT]
        wait_for(calm, "no sandbox in a transient state", timeout=60)

    def check_model(self, where):
        self.settle()
        items = self.listing()
        by_tag = {}
        for x in items:
            tag = x.get("metadata", {}).get("torture")
            if tag:
                check(tag not in by_tag, "%s: create %s made two sandboxes" % (where, tag))
                by_tag[tag] = x
        ids = {x["id"] for x in items}
        with self.model.lock:
            check(not (self.model.deleted & ids), "%s: deleted sandboxes listed: %r"
                  % (where, self.model.deleted & ids))
            for tag, box in self.model.boxes.items():
                x = by_tag.get(tag)
                if box["unsure"]:
                    # the kill (or a fault) hid the outcome: take what the server says
                    box.update(id=x["id"] if x else box["id"],
                               state=x["status"]["state"] if x else "Absent", unsure=False)
                    continue
                if box["state"] == "Absent":
                    check(x is None, "%s: %s exists after its acknowledged delete/refusal"
                          % (where, tag))
                    continue
                check(x is not None, "%s: sandbox %s (%s) lost" % (where, box["id"], tag))
                got = x["status"]["state"]
                if got == "Failed" and box.get("fault"):
                    box["state"] = "Failed"
                    continue
                check(got == box["state"], "%s: %s is %s, the last acknowledged operation "
                      "left it %s (%s)" % (where, box["id"], got, box["state"],
                                           x["status"].get("reason")))
        self.check_files(where)
        self.check_snapshots(where)
        self.check_footprint(where, items)

    def check_files(self, where):
        with self.model.lock:
            boxes = [b for b in self.model.boxes.values()
                     if b["state"] == "Running" and (b["last_exec"] or b["upload"])]
        for box in self.rng.sample(boxes, min(len(boxes), 8)):
            out, _ = self.s.run(box["id"], "cat /root/last 2>/dev/null; echo; "
                                "cat /root/up 2>/dev/null")
            # the last acknowledged write, or a later one whose answer a kill swallowed
            if box["last_exec"]:
                check(str(box["last_exec"]) in out or str(box.get("exec_try")) in out,
                      "%s: %s lost its acknowledged exec: %r" % (where, box["id"], out))
            if box["upload"]:
                text = "".join(out)
                check(box["upload"].decode() in text or box["upload_try"].decode() in text,
                      "%s: %s lost its acknowledged upload" % (where, box["id"]))

    def check_snapshots(self, where):
        r = self.req("GET", "/v1/snapshots?pageSize=200")
        check(r.status == 200, "list snapshots: %r" % r)
        got = {x["id"]: x["status"]["state"] for x in r.json()["items"]}
        with self.model.lock:
            for sid in self.model.snapshots:
                check(sid in got, "%s: acknowledged snapshot %s lost" % (where, sid))

        def written():
            r2 = self.req("GET", "/v1/snapshots?state=Creating")
            return not r2.json()["items"]
        wait_for(written, "%s: snapshots written" % where, timeout=60)

    def check_footprint(self, where, items):
        live = {x["id"] for x in items}
        running = {x["id"] for x in items if x["status"]["state"] in ("Running", "Paused")}
        for sid in self.model.deleted:
            self.s.wait_native_gone(sid, timeout=30)
        fp = native_footprint(self.s, self.cg, live | self.model.deleted)
        records = set(fp["records"])
        check(records <= live, "%s: runtime records of unlisted sandboxes: %r"
              % (where, records - live))
        check(running <= records, "%s: running sandboxes without a runtime record: %r"
              % (where, running - records))
        check(set(fp["layers"]) <= live, "%s: layers of unlisted sandboxes: %r"
              % (where, set(fp["layers"]) - live))
        owners = {o for _, o in fp["leases"]}
        check(owners <= live, "%s: leases of unlisted sandboxes: %r" % (where, owners - live))
        cgs = {c.rsplit("/", 1)[1] for c in fp["cgroups"]}
        check(cgs <= live, "%s: cgroups of unlisted sandboxes: %r" % (where, cgs - live))
        check_spares(fp, self.s.proc.pid, where)

    # ---- kills and faults -------------------------------------------------------------------
    def held(self, fn, where):
        """Run fn with the clients held and the server up, then check everything."""
        self.hold.set()
        time.sleep(0.3)  # in-flight requests finish (or fail)
        try:
            fn()
            self.check_model(where)
        finally:
            self.hold.clear()

    def kill_restart(self, n):
        self.up.clear()
        self.s.kill9()
        self.hold.set()
        time.sleep(0.2)
        self.start_server()
        print("kill -9 #%d, restarted (%d ops left)" % (n, self.ops_left), flush=True)
        try:
            self.check_model("after kill #%d" % n)
        finally:
            self.hold.clear()

    def running_box(self):
        with self.model.lock:
            boxes = [b for b in self.model.boxes.values() if b["state"] == "Running"
                     and not b["unsure"]]
        return self.rng.choice(boxes) if boxes else None

    def fault_execd(self):
        box = self.running_box()
        if not box:
            return
        procs = [p for p in native_footprint(self.s, self.cg, {box["id"]})["procs"]
                 if "sbx-execd" in open("/proc/%d/cmdline" % p, "rb").read().decode(
                     errors="replace") and box["id"] in open("/proc/%d/cgroup" % p).read()]
        for p in procs:
            try:
                os.kill(p, 9)
            except OSError:
                pass
        box["fault"] = True
        box["state"] = "Failed"

        def lost():
            r = self.req("GET", "/v1/sandboxes/" + box["id"])
            return r.json()["status"]["state"] == "Failed"
        wait_for(lost, "a sandbox whose execd died to be Failed", timeout=30)
        print("fault: execd of %s killed -> Failed" % box["id"], flush=True)

    def fault_sqlite(self):
        db = sqlite3.connect(os.path.join(self.s.state, "sbx.db"), timeout=1)
        db.execute("BEGIN EXCLUSIVE")
        try:
            r = self.req("GET", "/health")
            check(r.status == 503, "health with the store locked: %r" % r)
            r = self.req("POST", "/v1/sandboxes", {"image": {"uri": IMAGE},
                                                  "entrypoint": ["sleep", "100"],
                                                  "resourceLimits": LIMITS,
                                                  "metadata": {"torture": "locked"}},
                         timeout=60)
            check(r.status >= 500 and "code" in r.json(), "a create with the store locked "
                  "fails with an error envelope: %r" % r)
        finally:
            db.rollback()
            db.close()
        check(self.req("GET", "/health").status == 200, "health after the lock")
        items = [x for x in self.listing() if x.get("metadata", {}).get("torture") == "locked"]
        check(not items, "a refused create left a sandbox: %r" % items)
        print("fault: SQLite locked -> 503 and a clean refusal", flush=True)

    def small_disk(self):
        """The state dir on a file system of its own (a 2 GiB ext4 image, loop-mounted), so that
        the disk-full fault can fill it without touching the machine's disk."""
        img = os.path.join(self.s.tmp, "disk.img")
        with open(img, "wb") as f:
            f.truncate(2 << 30)
        subprocess.run(["mkfs.ext4", "-q", "-F", img], check=True, capture_output=True)
        os.makedirs(self.s.state, exist_ok=True)
        subprocess.run(["mount", "-o", "loop", img, self.s.state], check=True,
                       capture_output=True)
        self.mounted = True

    def fault_disk(self):
        """Fill the state dir's file system below providers.native.min_free_disk: creates are
        refused with a clear error, what runs keeps running, and after freeing it all works."""
        st = os.statvfs(self.s.state)
        free = st.f_bavail * st.f_frsize
        total = st.f_blocks * st.f_frsize
        if free - total * 0.05 > (8 << 30):
            print("fault: disk-full skipped (%d GiB free: too much to fill here)"
                  % (free >> 30), flush=True)
            return
        filler = os.path.join(self.s.state, "filler")
        with open(filler, "wb") as f:
            os.posix_fallocate(f.fileno(), 0, int(free - total * 0.04))
        try:
            r = self.req("POST", "/v1/sandboxes", {"image": {"uri": IMAGE},
                                                  "entrypoint": ["sleep", "100"],
                                                  "resourceLimits": LIMITS,
                                                  "metadata": {"torture": "full"}})
            check(r.status in (429, 507, 503) and "disk" in r.json().get("message", ""),
                  "a create on a full disk is refused naming the disk: %r" % r)
        finally:
            os.unlink(filler)
        print("fault: full disk -> refused", flush=True)

    def fault_oom(self):
        r = self.req("POST", "/v1/sandboxes", {"image": {"uri": IMAGE},
                                              "entrypoint": ["sleep", "100000"],
                                              "resourceLimits": {"cpu": "1", "memory": "64Mi"},
                                              "metadata": {"torture": "oom"}})
        check(r.status == 202, "oom sandbox: %r" % r)
        sid = r.json()["id"]
        out, events = self.s.run(sid, "head -c 300m /dev/zero | tail > /dev/null; echo rc=$?")
        check(self.req("GET", "/v1/sandboxes/" + sid).json()["status"]["state"] == "Running",
              "the sandbox survives an out-of-memory kill of its hog")
        out2, _ = self.s.run(sid, "echo after")
        check(out2 == ["after"], "commands run after the OOM kill: %r" % out2)
        check(self.req("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete oom sandbox")
        self.model.deleted.add(sid)
        print("fault: OOM in a sandbox -> its hog killed (%r), the sandbox runs on"
              % (out[-1:] if out else events[-1:]), flush=True)

    def fault_clock(self):
        """Step the host's wall clock back an hour (as an NTP step or `date -s` does), kill a
        sandbox's execd, and step the clock forward again. The server's timed waits (reaper,
        connection deadlines, refreshers) run on CLOCK_MONOTONIC: its reaper keeps ticking, so
        the dead sandbox is still found Failed within seconds, and nothing sticks. This steps
        the whole machine's clock: `make torture` runs it, CI's short form does not."""
        m0 = time.monotonic()
        t0 = time.clock_gettime(time.CLOCK_REALTIME)
        time.clock_settime(time.CLOCK_REALTIME, t0 - 3600)
        try:
            print("fault: wall clock stepped back 1 h", flush=True)
            self.fault_execd()
        finally:
            time.clock_settime(time.CLOCK_REALTIME, t0 + (time.monotonic() - m0))
        print("fault: wall clock stepped forward again", flush=True)

    def memcg_root(self):
        """The memory controller's root (cgroup v1), or the unified root (v2)."""
        if os.path.exists("/sys/fs/cgroup/memory/cgroup.procs"):
            return "/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.oom_control"
        return "/sys/fs/cgroup", "memory.max", "memory.events"

    def fault_server_oom(self):
        """The server's own memory cgroup runs out: the kernel's OOM killer ends it (no
        shutdown path runs, as with kill -9). It is restarted and the invariants hold: the
        sandboxes live in cgroups of their own and survive."""
        root, limit_file, events_file = self.memcg_root()
        cg = os.path.join(root, "sbx-torture-server-%d" % os.getpid())
        os.makedirs(cg, exist_ok=True)
        try:
            with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                f.write(str(self.s.proc.pid))
            # On v1 only what it allocates from now on is charged here: a small limit is hit
            # by the request bodies below.
            with open(os.path.join(cg, limit_file), "w") as f:
                f.write(str(48 << 20))
            self.up.clear()
            body = b'{"metadata": {"x": "' + b"y" * ((1 << 20) - 64) + b'"}}'
            deadline = time.time() + 60
            while self.s.proc.poll() is None and time.time() < deadline:
                with concurrent.futures.ThreadPoolExecutor(16) as pool:
                    for _ in range(32):
                        pool.submit(self.quiet_post, body)
            check(self.s.proc.poll() == -9,
                  "the server is killed by its cgroup's OOM killer (exit %r)" % self.s.proc.poll())
            events = open(os.path.join(cg, events_file)).read()
            check("oom_kill " in events and "oom_kill 0" not in events,
                  "the kill was the cgroup's OOM killer: %r" % events)
        finally:
            if self.s.proc.poll() is None:
                self.s.kill9()
            for _ in range(50):
                try:
                    os.rmdir(cg)
                    break
                except OSError:
                    time.sleep(0.1)
        self.start_server()
        print("fault: the server's cgroup out of memory -> OOM-killed, restarted", flush=True)

    def quiet_post(self, body):
        try:
            self.s.request("POST", "/v1/sandboxes", raw=body, timeout=20)
        except (OSError, http.client.HTTPException):
            pass

    # ---- the run ----------------------------------------------------------------------------
    def setup(self):
        if "disk-full" in self.args.faults:
            self.small_disk()
        archive = os.path.join(self.s.tmp, "busybox.tar")
        busybox_image.write(archive, IMAGE)
        subprocess.run([self.s.sbx, "image", "import", "--state-dir", self.s.state, archive],
                       check=True, capture_output=True)
        self.start_server()
        r = self.req("POST", "/v1/sandboxes", {"image": {"uri": IMAGE},
                                              "entrypoint": ["sleep", "10"],
                                              "resourceLimits": LIMITS})
        if r.status != 202:
            raise Skip("no native sandbox can be made here: %r" % r)
        self.req("DELETE", "/v1/sandboxes/" + r.json()["id"])

    def run(self):
        self.setup()
        faults = [f for f in self.args.faults.split(",") if f]
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(self.args.clients) as pool:
            futs = [pool.submit(self.client, i) for i in range(self.args.clients)]
            per = max(1, self.args.ops // (self.args.kills + len(faults) + 1))
            events = ["kill"] * self.args.kills + faults
            self.rng.shuffle(events)
            n = 0
            for ev in events:
                target = self.ops_left - per
                while self.ops_left > max(target, 0) and not all(f.done() for f in futs):
                    time.sleep(0.05)
                if ev == "kill":
                    n += 1
                    self.kill_restart(n)
                else:
                    fn = {"execd": self.fault_execd, "sqlite-lock": self.fault_sqlite,
                          "disk-full": self.fault_disk, "oom": self.fault_oom,
                          "server-oom": self.fault_server_oom, "clock": self.fault_clock}[ev]
                    self.held(fn, "after fault %s" % ev)
            for f in futs:
                f.result()
        self.check_model("the end")
        print("ops: %s in %.0f s" % (dict(sorted(self.model.counts.items())), time.time() - t0))
        self.teardown()

    def teardown(self):
        items = self.listing()
        for x in items:
            r = self.req("DELETE", "/v1/sandboxes/" + x["id"])
            check(r.status == 204, "final delete of %s: %r" % (x["id"], r))
        for x in items:
            self.s.wait_native_gone(x["id"], timeout=30)
        for x in self.req("GET", "/v1/snapshots?pageSize=200").json()["items"]:
            self.req("DELETE", "/v1/snapshots/" + x["id"])
        ids = {x["id"] for x in items} | self.model.deleted
        wait_for(lambda: not native_footprint(self.s, self.cg, ids)["procs"],
                 "every sandbox process to go")
        fp = native_footprint(self.s, self.cg, ids)
        left = {k: v for k, v in fp.items() if v and k not in ("mounts", "spares")}
        check(not left, "nothing left after deleting everything: %r" % left)
        check_spares(fp, self.s.proc.pid, "after deleting everything")
        print("spare cgroups kept at the end: %d" % len(fp["spares"]), flush=True)
        check(self.s.stop() == 0, "clean stop")
        check(not native_footprint(self.s, self.cg, ids)["spares"],
              "a clean stop removes the spare cgroups")
        self.s.gc_runtime()
        fp = native_footprint(self.s, self.cg, ids)
        for path in fp["cgroups"] + fp["spares"]:
            os.rmdir(path)

    def cleanup(self):
        self.s.kill9()
        self.s.gc_runtime()
        if self.mounted:
            subprocess.run(["umount", "-l", self.s.state], capture_output=True)
        self.s.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sbx")
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--faults", default="execd,sqlite-lock,disk-full,oom,server-oom,clock")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    if args.seed is None:
        args.seed = random.randrange(1 << 30)
    print("seed %d (rerun with --seed %d)" % (args.seed, args.seed), flush=True)
    t = Torture(args.sbx, args)
    try:
        t.run()
    except Skip as e:
        print("SKIP: %s" % e)
        t.cleanup()
        sys.exit(77)
    except Exception:
        import traceback
        traceback.print_exc()
        print("---- server log ----\n%s" % t.s.log())
        t.cleanup()
        sys.exit(1)
    t.cleanup()
    print("ok")


if __name__ == "__main__":
    main()
