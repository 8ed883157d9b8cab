#!/usr/bin/env python3
"""Soak: N sandboxes on a real `sbx serve` (native provider, the built-in host image) with
sustained exec and file traffic through the router for a while; the server's RSS and open file
descriptors are sampled and must stay flat after the warm-up (growth below a bound), and no
request may fail.

  soak.py SBX [--sandboxes N] [--seconds S] [--clients C] [--max-growth PCT]
`make soak` runs the long form (1000 sandboxes, 10 minutes); CTest (torture/soak-short) a short
one. Exit 77 when no native sandbox can be made here."""
import argparse
import concurrent.futures
import os
import random
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration", "server"))

from harness import Fail, Server, Skip, check  # noqa: E402


def proc_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def proc_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


class Soak:
    def __init__(self, sbx, args):
        self.args = args
        self.cg = "sbx-soak-%d" % os.getpid()
        conf = ('providers = { supported = ["native"]; default = "native";\n'
                '  native = { cgroup_parent = "%s"; }; };\nlimits = { max_sandboxes = %d; };\n'
                % (self.cg, args.sandboxes + 10))
        # An ASan build keeps freed memory in a quarantine (256 MiB by default) that would read
        # as growth: a small one, so RSS shows what the server keeps.
        env = os.environ.copy()
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=4").lstrip(":")
        self.s = Server(sbx, config_text=conf, tag="soak", env=env)
        self.ids = []
        self.errors = []
        self.ops = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def create_all(self):
        def one(i):
            r = self.s.request("POST", "/v1/sandboxes", {
                "image": {"uri": "host"}, "entrypoint": ["sleep", "100000"],
                "resourceLimits": {"cpu": "1", "memory": "128Mi"},
                "metadata": {"soak": str(i)}}, timeout=120)
            check(r.status == 202, "create %d: %r" % (i, r))
            return r.json()["id"]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            self.ids = list(pool.map(one, range(self.args.sandboxes)))

    def traffic(self, seed):
        rng = random.Random(seed)
        while not self.stop.is_set():
            sid = rng.choice(self.ids)
            n = rng.randint(0, 10 ** 9)
            try:
                if rng.random() < 0.6:
                    # a file per request: clients share sandboxes
                    out, events = self.s.run(sid, "echo %d > /tmp/s%d; cat /tmp/s%d; rm /tmp/s%d"
                                             % (n, n, n, n))
                    ok = out == [str(n)]
                else:
                    data = os.urandom(rng.randint(1, 64 << 10))
                    r = self.s.request("POST", "/sandboxes/%s/proxy/44772/files/upload" % sid,
                                       raw=self.multipart(data, n),
                                       headers={"Content-Type":
                                                "multipart/form-data; boundary=soakB"})
                    ok = r.status == 200
                    if ok:
                        r = self.s.request("GET", "/sandboxes/%s/proxy/44772/files/download"
                                           "?path=/tmp/b%d" % (sid, n))
                        ok = r.status == 200 and r.body == data
            except (OSError, Fail) as e:
                ok, out = False, str(e)
            out = out if not ok else ""
            with self.lock:
                self.ops += 1
                if not ok:
                    self.errors.append("%s: %s" % (sid, str(out)[:200]))

    @staticmethod
    def multipart(data, n):
        meta = b'{"path": "/tmp/b%d", "mode": 644}' % n
        return (b"--soakB\r\nContent-Disposition: form-data; name=\"metadata\"; "
                b"filename=\"metadata\"\r\nContent-Type: application/json\r\n\r\n" + meta +
                b"\r\n--soakB\r\nContent-Disposition: form-data; name=\"file\"; "
                b"filename=\"f\"\r\nContent-Type: application/octet-stream\r\n\r\n" + data +
                b"\r\n--soakB--\r\n")

    def run(self):
        self.s.start()
        probe = self.s.create()
        if probe.status != 202:
            raise Skip("no native sandbox can be made here: %r" % probe)
        self.s.request("DELETE", "/v1/sandboxes/" + probe.json()["id"])
        t0 = time.time()
        self.create_all()
        print("%d sandboxes in %.1f s" % (len(self.ids), time.time() - t0), flush=True)
        pid = self.s.proc.pid
        threads = [threading.Thread(target=self.traffic, args=(i,))
                   for i in range(self.args.clients)]
        for t in threads:
            t.start()
        samples = []
        warm = self.args.seconds * 0.2
        start = time.time()
        while time.time() - start < self.args.seconds:
            time.sleep(max(1.0, self.args.seconds / 60))
            samples.append((time.time() - start, proc_rss_kib(pid), proc_fds(pid), self.ops))
        self.stop.set()
        for t in threads:
            t.join()
        after = [x for x in samples if x[0] >= warm]
        check(len(after) >= 2, "enough samples after the warm-up")
        rss0, rss1 = after[0][1], max(x[1] for x in after)
        fd0, fd1 = after[0][2], max(x[2] for x in after)
        rate = self.ops / self.args.seconds
        print("ops %d (%.0f/s), errors %d; server RSS %d -> max %d KiB (%+.2f%%), fds %d -> max "
              "%d" % (self.ops, rate, len(self.errors), rss0, rss1, 100.0 * (rss1 - rss0) / rss0,
                      fd0, fd1), flush=True)
        check(not self.errors, "%d failed requests (first: %s)" % (len(self.errors),
                                                                  self.errors[:3]))
        bound = self.args.max_growth / 100.0
        check(rss1 <= rss0 * (1 + bound) + 256, "server RSS grew %d -> %d KiB (bound %.1f%%)"
              % (rss0, rss1, self.args.max_growth))
        check(fd1 <= fd0 + max(8, fd0 * bound), "server fds grew %d -> %d" % (fd0, fd1))
        self.teardown()

    def teardown(self):
        def rm(sid):
            r = self.s.request("DELETE", "/v1/sandboxes/" + sid, timeout=120)
            check(r.status == 204, "delete %s: %r" % (sid, r))
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(rm, self.ids))
        check(self.s.stop() == 0, "clean stop")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sbx")
    ap.add_argument("--sandboxes", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--max-growth", type=float, default=1.0, help="percent, after the warm-up")
    args = ap.parse_args()
    soak = Soak(args.sbx, args)
    try:
        soak.run()
    except Skip as e:
        print("SKIP: %s" % e)
        soak.s.cleanup()
        sys.exit(77)
    except Exception:
        import traceback
        traceback.print_exc()
        print("---- server log (tail) ----\n%s" % soak.s.log()[-4000:])
        soak.s.cleanup()
        sys.exit(1)
    soak.s.cleanup()
    print("ok")


if __name__ == "__main__":
    main()
