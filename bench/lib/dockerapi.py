#!/usr/bin/env python3
"""The peer rows of sections 2, 3 and 5: the same lifecycle through the Docker Engine API.

OpenSandbox's Docker runtime drives exactly these calls (create, start, exec, pause/unpause,
remove), so this is what "the same thing with Docker" costs on this machine, measured with the
same client-side timer as the sbx rows (api.py). Runs against the bench's private dockerd.
  dockerapi.py --work W --socket SOCK --image IMG --mode quick|full
"""

import argparse
import concurrent.futures
import http.client
import json
import socket
import sys
import threading
import time

import api
import bench
import stats

CONFIG = {
    "full": {"serial": 30, "par10_rounds": 3, "par50_rounds": 1, "exec": 200, "exec_warm": 10, "pause": 30},
    "quick": {"serial": 5, "par10_rounds": 1, "par50_rounds": 0, "exec": 30, "exec_warm": 3, "pause": 5},
}
ERRORS = (api.ApiError, OSError, KeyError, ValueError, http.client.HTTPException)


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=120):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.path)
        self.sock = s


class Docker:
    def __init__(self, sock, image):
        self.sock, self.image = sock, image
        self.local = threading.local()

    def call(self, method, path, body=None, expect=(200, 201, 204), fresh=False):
        conn = UnixConnection(self.sock) if fresh else getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = UnixConnection(self.sock)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        try:
            conn.request(method, "/v1.41" + path, json.dumps(body) if body is not None else None, headers)
            resp = conn.getresponse()
            data = resp.read()  # an exec start stream: read to its end
        except (OSError, http.client.HTTPException):
            conn.close()
            if not fresh:
                self.local.conn = None
            raise
        if fresh:
            conn.close()
        if resp.status not in expect:
            raise api.ApiError(f"{method} {path}: HTTP {resp.status} {data[:200]!r}")
        return json.loads(data) if data[:1] in (b"{", b"[") else data

    def create(self):
        body = {"Image": self.image, "Cmd": ["/bin/sleep", "86400"], "HostConfig": {"NetworkMode": "none"}}
        cid = self.call("POST", "/containers/create", body)["Id"]
        self.call("POST", f"/containers/{cid}/start")
        return cid

    def exec_true(self, cid):
        eid = self.call("POST", f"/containers/{cid}/exec",
                        {"Cmd": ["/bin/true"], "AttachStdout": True, "AttachStderr": True})["Id"]
        self.call("POST", f"/exec/{eid}/start", {"Detach": False, "Tty": False}, expect=(200,), fresh=True)
        return self.call("GET", f"/exec/{eid}/json")["ExitCode"] == 0

    def remove(self, cid):
        self.call("DELETE", f"/containers/{cid}?force=1")

    def until(self, cid, action, paused):
        self.call("POST", f"/containers/{cid}/{action}")
        end = time.monotonic() + 30
        while self.call("GET", f"/containers/{cid}/json")["State"]["Paused"] != paused:
            if time.monotonic() > end:
                raise api.ApiError(f"{action}: not done after 30 s")
            time.sleep(0.001)
        return True


def rec(section, rid, variant, key, what, runs, warm=None, extra=None):
    errs = [r[2] for r in runs if r[2]]
    r = api.latency_record(section, rid, variant, what, [x[0] for x in runs], [x[1] for x in runs],
                           {"first_error": errs[0]} if errs else None)
    r.update(extra or {})
    r["tool"] = "docker"
    r["ratio_key"] = key
    if warm is not None:
        r["warmup"] = {"samples": [x[0] for x in warm], "exit_codes": [x[1] for x in warm]}
    bench.write_record(work_dir[0], r)


work_dir = [""]


def tti_once(d):
    t0 = time.monotonic()
    try:
        cid = d.create()
        try:
            ok = d.exec_true(cid)
            t1 = time.monotonic()
        finally:
            d.remove(cid)
        return t1 - t0, 0 if ok else 1, None, time.monotonic() - t0
    except ERRORS as e:
        dt = time.monotonic() - t0
        return dt, 1, str(e)[:300], dt


def tti(d, cfg):
    what = ("Docker Engine API over its unix socket: POST /containers/create (busybox image, `sleep`, "
            "network none) -> start -> exec create + start `/bin/true` (stream read to its end) -> exec "
            "inspect; with the DELETE ?force=1 in 'with_delete'")
    for rid, variant, key, clients, rounds in (("tti.serial.docker", "serial", "tti.serial", 1, cfg["serial"]),
                                               ("tti.par10.docker", "10 parallel", "tti.par10", 10, cfg["par10_rounds"]),
                                               ("tti.par50.docker", "50 parallel", "tti.par50", 50, cfg["par50_rounds"])):
        if rounds == 0:
            api.skip(work_dir[0], "tti", rid, variant, what, "skipped in --quick mode", tool="docker")
            continue
        runs = []
        for _ in range(rounds):
            barrier = threading.Barrier(clients)

            def one(_i):
                barrier.wait()
                return tti_once(d)

            with concurrent.futures.ThreadPoolExecutor(clients) as pool:
                runs += list(pool.map(one, range(clients)))
        with_delete = stats.summarize([r[3] for r in runs], [r[1] for r in runs])
        rec("tti", rid, variant, key, what, [r[:3] for r in runs], extra={"with_delete": with_delete})


def timed(fn):
    t0 = time.monotonic()
    try:
        ok = fn()
        return time.monotonic() - t0, 0 if ok else 1, None
    except ERRORS as e:
        return time.monotonic() - t0, 1, str(e)[:300]


def exec_rtt(d, cfg):
    cid = d.create()
    try:
        what = ("docker exec through the Engine API on a running container: exec create + exec start "
                "`/bin/true` (stream read to its end, new connection as docker's hijack needs) + exec inspect")
        warm = [timed(lambda: d.exec_true(cid)) for _ in range(cfg["exec_warm"])]
        runs = [timed(lambda: d.exec_true(cid)) for _ in range(cfg["exec"])]
        rec("exec", "exec.docker", "docker exec via the Engine API", "exec", what, runs, warm)
    finally:
        d.remove(cid)


def pause(d, cfg):
    cid = d.create()
    try:
        p, r = [], []
        for _ in range(cfg["pause"]):
            p.append(timed(lambda: d.until(cid, "pause", True)))
            r.append(timed(lambda: d.until(cid, "unpause", False)))
        rec("pause", "pause.pause.docker", "pause", "pause.pause",
            "POST /containers/{id}/pause (cgroup freezer) then GET every 1 ms until State.Paused", p)
        rec("pause", "pause.resume.docker", "resume", "pause.resume",
            "POST /containers/{id}/unpause then GET every 1 ms until not State.Paused", r)
    finally:
        d.remove(cid)


def main(argv):
    ap = argparse.ArgumentParser(prog="dockerapi.py")
    ap.add_argument("--work", required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--mode", choices=sorted(CONFIG), default="full")
    args = ap.parse_args(argv)
    work_dir[0] = args.work
    cfg = CONFIG[args.mode]
    d = Docker(args.socket, args.image)
    for name, fn in (("tti", tti), ("exec", exec_rtt), ("pause", pause)):
        try:
            fn(d, cfg)
        except ERRORS as e:
            print(f"dockerapi.py: {name} failed: {e}", file=sys.stderr)
            api.skip(args.work, name, f"{name}.docker.error", "-", "-", f"aborted: {str(e)[:300]}", tool="docker")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
