#!/usr/bin/env python3
"""sbx-execd as a daemon: metrics, the access token, the hostile-input table, client
disconnects (no leaked process or fd), idle cost, and the static release binary."""
import http.client
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

from harness import Execd, Fail, check, children_of, fd_count, free_port, run_tests, wait_until

Q = urllib.parse.quote


def test_metrics(ex):
    t0 = time.time()
    m = ex.json("GET", "/metrics")
    check(m["cpu_count"] > 0 and 0 <= m["cpu_used_pct"] <= 100, "cpu %r" % m)
    check(0 <= m["mem_used_mib"] <= m["mem_total_mib"], "mem %r" % m)
    check(abs(m["timestamp"] / 1000 - t0) < 10, "timestamp %r" % m)
    c = ex.conn()
    c.request("GET", "/metrics/watch", headers=ex.headers())
    r = c.getresponse()
    check(r.getheader("Content-Type") == "text/event-stream", "watch type")
    t0 = time.time()
    for _ in range(2):
        w = json.loads(r.readline())
        check(w["cpu_count"] > 0 and 0 <= w["mem_used_mib"] <= w["mem_total_mib"], "%r" % w)
    check(time.time() - t0 > 0.9, "watch sends once a second")
    c.close()


def raw(ex, data, read=True):
    """Send raw bytes; return the status code of the answer (or None when closed)."""
    s = socket.create_connection((ex.host, ex.port), timeout=10)
    try:
        s.sendall(data)
        if not read:
            return None
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        if not buf.startswith(b"HTTP/1."):
            return None
        return int(buf.split(b" ")[1])
    finally:
        s.close()


def test_hostile_table(ex):
    tok = ("X-EXECD-ACCESS-TOKEN: %s\r\n" % ex.token) if ex.token else ""
    cases = [
        ("malformed JSON", "POST", "/command", '{"command": ', 400),
        ("JSON wrong type", "POST", "/command", '{"command": ["ls"]}', 400),
        ("JSON not object", "POST", "/files/permissions", '"x"', 400),
        ("NUL in JSON", "POST", "/command", '{"command": "a\\u0000b"}', 400),
        ("NUL in query", "GET", "/files/info?path=/tmp%00/etc", None, 400),
        ("relative path", "GET", "/files/info?path=etc/passwd", None, 400),
        ("relative dotdot", "GET", "/files/download?path=../../etc/passwd", None, 400),
        ("empty path", "GET", "/files/download?path=", None, 400),
        ("long path", "GET", "/files/info?path=/" + "a" * 5000, None, 400),
        ("symlink loop", "GET", "/files/download?path=" + Q(os.path.join(ex.tmp, "loop")),
         None, 400),
        ("bad depth", "GET", "/directories/list?path=/&depth=-1", None, 400),
        ("bad cursor", "GET", "/command/x/logs?cursor=abc", None, 400),
        ("unknown path", "GET", "/nope", None, 404),
        ("wrong method", "PUT", "/ping", "", 405),
        ("bad multipart", "POST", "/files/upload", "--x\r\nnope", 400),
        ("huge mv list item", "POST", "/files/mv", json.dumps([{"src": 1, "dest": 2}]), 400),
        ("code without code", "POST", "/code", '{"context": {}}', 400),
        ("code NUL", "POST", "/code", '{"code": "1\\u0000"}', 400),
    ]
    os.symlink(os.path.join(ex.tmp, "loop"), os.path.join(ex.tmp, "loop"))
    for name, method, path, body, want in cases:
        hdrs = {"Content-Type": "multipart/form-data; boundary=x"} if "upload" in path else {}
        st, h, data = ex.request(method, path, body, hdrs)
        check(st == want, "%s: status %d, want %d (%r)" % (name, st, want, data[:200]))
        j = json.loads(data)
        check(isinstance(j.get("code"), str) and isinstance(j.get("message"), str),
              "%s: not an error envelope: %r" % (name, data))
    # huge headers, garbage request line, bad Content-Length, bad chunking: 4xx or a close
    for name, blob in [
            ("huge header", b"GET /ping HTTP/1.1\r\nX-Big: " + b"a" * 200000 + b"\r\n\r\n"),
            ("garbage", b"\x00\x01\x02 nonsense\r\n\r\n"),
            ("bad content-length", b"POST /command HTTP/1.1\r\nContent-Length: -5\r\n\r\n"),
            ("two content-lengths", b"POST /files/upload HTTP/1.1\r\nContent-Length: 5\r\n"
             b"Content-Length: 6\r\n\r\nhello"),
            ("bad chunk", b"POST /command HTTP/1.1\r\n" + tok.encode() +
             b"Transfer-Encoding: chunked\r\n\r\nzz\r\n")]:
        st = raw(ex, blob)
        check(st is None or 400 <= st < 500, "%s: status %r" % (name, st))
    st, _, _ = ex.request("GET", "/ping")
    check(st == 200, "daemon down after the hostile table")


def test_disconnect_kills_and_no_fd_leak(ex):
    if ex.external:
        raise Fail("needs a local daemon")
    ex.request("GET", "/ping")
    before = fd_count(ex.pid)
    for cmd in ("sleep 1000", "yes"):
        s = socket.create_connection((ex.host, ex.port))
        body = json.dumps({"command": cmd}).encode()
        s.sendall(b"POST /command HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" %
                  (len(body), body))
        buf = b""
        while b'"init"' not in buf:
            buf += s.recv(65536)
        wait_until(lambda: len(children_of(ex.pid)) == 1, 5, "command to start")
        child = children_of(ex.pid)[0]
        s.close()
        wait_until(lambda: not os.path.exists("/proc/%d" % child), 10,
                   "command %r to be killed after the client left" % cmd)
    wait_until(lambda: fd_count(ex.pid) <= before, 5, "fds back to %d" % before)


def test_idle_costs_nothing(ex):
    if ex.external:
        raise Fail("needs a local daemon")

    def cpu():
        with open("/proc/%d/stat" % ex.pid) as f:
            v = f.read().rsplit(")", 1)[1].split()
        return int(v[11]) + int(v[12])

    time.sleep(0.3)
    a = cpu()
    time.sleep(2)
    check(cpu() - a <= 1, "idle execd used CPU: %d ticks in 2 s" % (cpu() - a))


def test_access_token(binary):
    ex = Execd(binary, token="s3cr3t-token", external_ok=False)
    try:
        st, _, _ = ex.request("GET", "/ping", headers={})
        check(st == 200, "ping needs no token")
        ex.token = None
        for hdrs in ({}, {"X-EXECD-ACCESS-TOKEN": "wrong"}, {"X-EXECD-ACCESS-TOKEN": "s3cr3t"},
                     {"X-EXECD-ACCESS-TOKEN": "s3cr3t-token-longer"}):
            st, _, body = ex.request("POST", "/command", {"command": "true"}, hdrs)
            j = json.loads(body)
            check(st == 401 and j["code"] == "UNAUTHORIZED" and "error" in j,
                  "token %r: %d %r" % (hdrs, st, body))
        ex.token = "s3cr3t-token"
        st, ev = ex.stream("/command", {"command": "echo ${EXECD_ACCESS_TOKEN:-unset}"})
        check(st == 200 and ev[1]["text"] == "unset", "token leaked to commands: %r" % ev)
        check(ex.stop() == 0, "exit code")
    finally:
        ex.close()
    env = dict(os.environ, EXECD_ACCESS_TOKEN="from-env")
    ex = Execd(binary, external_ok=False, env=env)
    try:
        st, _, _ = ex.request("GET", "/files/info?path=/")
        check(st == 401, "env token not enforced: %d" % st)
        ex.token = "from-env"
        st, ev = ex.stream("/command", {"command": "echo ${EXECD_ACCESS_TOKEN:-unset}"})
        check(ev[1]["text"] == "unset", "env token inherited by commands")
        check(ex.stop() == 0, "exit code")
    finally:
        ex.close()


def test_sigterm_stops_children(binary):
    ex = Execd(binary, external_ok=False)
    try:
        st, ev = ex.stream("/command", {"command": "sleep 1000", "background": True})
        wait_until(lambda: len(children_of(ex.pid)) == 1, 5, "child")
        child = children_of(ex.pid)[0]
        rc = ex.stop()
        check(rc == 0, "exit code after SIGTERM %d" % rc)
        check(not os.path.exists("/proc/%d" % child), "child survived SIGTERM of execd")
    finally:
        ex.close()


def test_ready_fd(binary):
    """--ready-fd: one byte once execd listens (so /ping answers at once), then the fd is
    closed (EOF, nothing left for commands to inherit)."""
    r, w = os.pipe()
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="execd-ready-%d-" % os.getpid())
    proc = subprocess.Popen([binary, "--listen", "127.0.0.1:%d" % port, "--state-dir",
                             os.path.join(tmp, "state"), "--ready-fd", str(w)],
                            pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    os.close(w)
    try:
        ready, _, _ = select.select([r], [], [], 10)
        check(ready and os.read(r, 16) == b"R", "no readiness byte")
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/ping")
        check(c.getresponse().status == 200, "not listening when it said so")
        ready, _, _ = select.select([r], [], [], 10)
        check(ready and os.read(r, 16) == b"", "ready fd still open in execd")
    finally:
        os.close(r)
        proc.terminate()
        proc.wait(20)
        shutil.rmtree(tmp, ignore_errors=True)


def test_ready_fd_failure(binary):
    """A start that fails tells the launcher why on the ready fd ("E" + reason): its log is in
    its memory, gone with it. Here the port is taken."""
    r, w = os.pipe()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        tmp = tempfile.mkdtemp(prefix="execd-ready-%d-" % os.getpid())
        proc = subprocess.Popen([binary, "--listen", "127.0.0.1:%d" % port, "--state-dir",
                                 os.path.join(tmp, "state"), "--ready-fd", str(w)],
                                pass_fds=(w,), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        os.close(w)
        try:
            check(proc.wait(10) != 0, "execd exits when it cannot listen")
            got = os.read(r, 1024)
            check(got.startswith(b"E") and b"127.0.0.1:%d" % port in got,
                  "the reason on the ready fd: %r" % got)
        finally:
            os.close(r)
            shutil.rmtree(tmp, ignore_errors=True)


def test_token_not_in_environ(binary):
    """The token given in the environment is gone from /proc/<execd>/environ (unsetenv alone
    leaves the bytes where the kernel reads them). (That execd is non-dumpable, so a sandbox's
    processes cannot read it at all, is tested inside real sandboxes: server/isolation.)"""
    env = dict(os.environ, EXECD_ACCESS_TOKEN="environ-secret-%d" % os.getpid())
    ex = Execd(binary, external_ok=False, env=env)
    try:
        with open("/proc/%d/environ" % ex.pid, "rb") as f:
            environ = f.read()
        check(b"EXECD_ACCESS_TOKEN=" in environ, "control: the variable's name is still there")
        check(env["EXECD_ACCESS_TOKEN"].encode() not in environ,
              "the token is readable in /proc/<execd>/environ")
        check(ex.stop() == 0, "exit code")
    finally:
        ex.close()


def test_logs_ring(binary):
    """The entrypoint's output and execd's log are kept in a bounded ring (GET /logs), the
    oldest bytes dropped first; and every child of execd is the OOM killer's first choice."""
    script = ('echo EP-START; head -c 600000 /dev/zero | tr "\\0" x; echo; echo EP-END >&2; '
              'cat /proc/self/oom_score_adj; sleep 60')
    ex = Execd(binary, args=["--log-buffer", "64k", "--", "/bin/sh", "-c", script],
               external_ok=False)
    try:
        def logs():
            st, hdrs, body = ex.request("GET", "/logs")
            check(st == 200, "GET /logs: %d" % st)
            return hdrs, body
        wait_until(lambda: b"EP-END" in logs()[1] and b"\n500\n" in logs()[1], 10,
                   "the entrypoint's output in /logs")
        hdrs, body = logs()
        check(len(body) <= 64 * 1024, "bounded: %d bytes" % len(body))
        check(b"EP-START" not in body, "the oldest bytes went first")
        dropped = hdrs.get("x-sbx-log-dropped", "0")
        check(int(dropped) >= 600000 - 64 * 1024, "dropped bytes counted: %s" % dropped)
        st, ev = ex.stream("/command", {"command": "cat /proc/self/oom_score_adj"})
        check(st == 200 and [e["text"] for e in ev if e["type"] == "stdout"] == ["500"],
              "a command's oom_score_adj: %r" % ev)
        with open("/proc/%d/oom_score_adj" % ex.pid) as f:
            check(f.read().strip() == "0", "execd's own stays 0")
        check(ex.stop() == 0, "exit code")
    finally:
        ex.close()


def test_entrypoint(binary):
    """`-- ENTRYPOINT`: started by execd with stdin /dev/null, without the access token in its
    environment, and reaped by it."""
    tmp = tempfile.mkdtemp(prefix="execd-ep-%d-" % os.getpid())
    out = os.path.join(tmp, "out")
    env = dict(os.environ, EXECD_ACCESS_TOKEN="ep-secret", EP_MARK="mark")
    script = 'read x; echo "rc=$? tok=${EXECD_ACCESS_TOKEN:-unset} mark=$EP_MARK" > "$0"'
    ex = Execd(binary, args=["--", "/bin/sh", "-c", script, out], external_ok=False, env=env)
    try:
        wait_until(lambda: os.path.exists(out) and os.path.getsize(out) > 0, 10, "entrypoint")
        with open(out) as f:
            got = f.read().strip()
        check(got == "rc=1 tok=unset mark=mark", "entrypoint saw: %r" % got)
        wait_until(lambda: not children_of(ex.pid), 10, "entrypoint reaped")
        check(ex.stop() == 0, "exit code")
    finally:
        ex.close()
        shutil.rmtree(tmp, ignore_errors=True)


def test_desktop_user_needs_root(binary):
    """SBX_DESKTOP_USER names another user but execd is not root: the desktop is refused with
    why (before any X server starts), and execd keeps serving."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return "skip (needs root and setpriv)"
    tmp = tempfile.mkdtemp(prefix="execd-du-%d-" % os.getpid())
    os.chmod(tmp, 0o777)
    env = dict(os.environ, SBX_DESKTOP_USER="daemon", TMPDIR=tmp)
    ex = Execd(binary, args=["--state-dir", os.path.join(tmp, "state"), "--desktop", "640x480"],
               external_ok=False, env=env,
               wrapper=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
    try:
        wait_until(lambda: "execd runs as uid 65534, not root" in ex.read_log(), 10,
                   "the refusal in the log")
        st, _, body = ex.request("GET", "/desktop")
        check(st == 200 and json.loads(body)["state"] != "running",
              "no desktop: %d %r" % (st, body))
        check(ex.stop() == 0, "exit code")
    finally:
        ex.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return "ok  "


def main():
    binary = sys.argv[1]
    # token and signal tests need their own daemons
    if len(sys.argv) > 2 and sys.argv[2] == "own":
        try:
            test_access_token(binary)
            print("ok   test_access_token", flush=True)
            test_sigterm_stops_children(binary)
            print("ok   test_sigterm_stops_children", flush=True)
            test_ready_fd(binary)
            print("ok   test_ready_fd", flush=True)
            test_entrypoint(binary)
            print("ok   test_entrypoint", flush=True)
            test_ready_fd_failure(binary)
            print("ok   test_ready_fd_failure", flush=True)
            test_token_not_in_environ(binary)
            print("ok   test_token_not_in_environ", flush=True)
            test_logs_ring(binary)
            print("ok   test_logs_ring", flush=True)
            print("%s test_desktop_user_needs_root" % test_desktop_user_needs_root(binary),
                  flush=True)
        except Fail as e:
            print("FAIL: %s" % e)
            sys.exit(1)
        sys.exit(0)
    run_tests(local_only=True, tests=[test_metrics, test_hostile_table,
                                      test_disconnect_kills_and_no_fd_leak,
                                      test_idle_costs_nothing])


if __name__ == "__main__":
    main()
