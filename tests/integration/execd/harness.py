"""Test harness for sbx-execd: start a daemon (or use one given by the environment) and talk
to it over HTTP with the standard library only.

  EXECD_BIN=path       the binary to start (default: argv of the test)
  EXECD_URL=http://h:p use an already running execd instead of starting one (the lead's
                       "inside a real sandbox" run); EXECD_TOKEN its access token if any.
"""
import contextlib
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
import urllib.parse

SKIP = 77


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Execd:
    """A running sbx-execd: started here (and stopped by pid) or external."""

    def __init__(self, binary=None, args=(), token=None, external_ok=True, env=None,
                 wrapper=()):
        self.proc = None
        self.tmp = tempfile.mkdtemp(prefix="execd-test-%d-" % os.getpid())
        self.token = token
        url = os.environ.get("EXECD_URL") if external_ok else None
        if url:
            u = urllib.parse.urlparse(url)
            self.host, self.port = u.hostname, u.port
            self.token = os.environ.get("EXECD_TOKEN", token)
            return
        self.host, self.port = "127.0.0.1", free_port()
        binary = binary or os.environ.get("EXECD_BIN")
        argv = list(wrapper) + [binary, "--listen", "%s:%d" % (self.host, self.port),
                                "--state-dir", os.path.join(self.tmp, "state")] + list(args)
        if token:
            argv += ["--access-token", token]
        self.log = open(os.path.join(self.tmp, "execd.log"), "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)
        self.wait_ready()

    @property
    def external(self):
        return self.proc is None

    def wait_ready(self, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc and self.proc.poll() is not None:
                raise Fail("execd exited early: %s" % self.read_log())
            try:
                st, _, _ = self.request("GET", "/ping")
                if st == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise Fail("execd did not answer /ping")

    def read_log(self):
        with contextlib.suppress(OSError):
            with open(os.path.join(self.tmp, "execd.log"), "rb") as f:
                return f.read().decode(errors="replace")
        return ""

    @property
    def pid(self):
        return self.proc.pid

    def conn(self, timeout=60):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def headers(self, extra=None):
        h = {}
        if self.token:
            h["X-EXECD-ACCESS-TOKEN"] = self.token
        h.update(extra or {})
        return h

    def request(self, method, path, body=None, headers=None, timeout=60):
        """One request; returns (status, headers dict (lower-case keys), body bytes)."""
        c = self.conn(timeout)
        try:
            if body is not None and not isinstance(body, (bytes, str)):
                body = json.dumps(body)
            c.request(method, path, body=body, headers=self.headers(headers))
            r = c.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            c.close()

    def json(self, method, path, body=None, expect=200, headers=None):
        st, _, data = self.request(method, path, body, headers)
        check(st == expect, "%s %s: status %d, want %d: %r" % (method, path, st, expect, data))
        return json.loads(data) if data else None

    def stream(self, path, body, timeout=120):
        """POST and parse the SSE answer: a list of events (dicts), checking the framing."""
        c = self.conn(timeout)
        try:
            c.request("POST", path, body=json.dumps(body),
                      headers=self.headers({"Content-Type": "application/json"}))
            r = c.getresponse()
            data = r.read()
            if r.status != 200:
                return r.status, data
            check(r.getheader("Content-Type", "").startswith("text/event-stream"),
                  "SSE content type: %r" % r.getheader("Content-Type"))
            return 200, parse_events(data)
        finally:
            c.close()

    def stop(self, sig=signal.SIGTERM, timeout=20):
        """Stop a daemon we started; returns its exit code."""
        if not self.proc:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Fail("execd did not exit on signal %d" % sig)
        self.log.close()
        return rc

    def close(self):
        if self.proc and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


def parse_events(data):
    """Bare `{json}\\n\\n` frames (COMPAT 2.3): no `data:` prefix, nothing else."""
    text = data.decode()
    check(text.endswith("\n\n") or text == "", "stream does not end with a blank line")
    events = []
    for frame in text.split("\n\n")[:-1]:
        check(frame.startswith("{") and "\n" not in frame, "bad frame %r" % frame[:200])
        ev = json.loads(frame)
        check(isinstance(ev.get("timestamp"), int), "event without ms timestamp: %r" % ev)
        check(abs(ev["timestamp"] / 1000 - time.time()) < 600, "timestamp not in ms: %r" % ev)
        events.append(ev)
    return events


def check_contract(events):
    """init first, exactly one terminal event, last; returns (init id, exit code, outputs)."""
    check(events and events[0]["type"] == "init", "first event is not init: %r" % events[:1])
    check(sum(e["type"] == "init" for e in events) == 1, "more than one init")
    terminal = [e for e in events if e["type"] in ("execution_complete", "error")]
    check(len(terminal) == 1, "want exactly one terminal event, got %r" % terminal)
    check(events[-1] is terminal[0], "terminal event is not the last one")
    t = terminal[0]
    if t["type"] == "error":
        check(t["error"]["ename"] == "CommandExecError", "ename: %r" % t)
        code = int(t["error"]["evalue"])
        check(code != 0, "error event with exit code 0")
    else:
        check(isinstance(t.get("execution_time"), int), "execution_time missing")
        code = 0
    out = [e["text"] for e in events if e["type"] == "stdout"]
    err = [e["text"] for e in events if e["type"] == "stderr"]
    return events[0]["text"], code, out, err


def run_tests(tests, cleanup=(), local_only=False, **kw):
    """Run test functions against one daemon; exit 0/1/77. local_only: the tests look at the
    daemon's process or files directly, so they skip against an external EXECD_URL."""
    binary = sys.argv[1] if len(sys.argv) > 1 else None
    if local_only and os.environ.get("EXECD_URL"):
        print("SKIP: these tests inspect the daemon's process and files on this host")
        sys.exit(SKIP)
    only = sys.argv[2:] if len(sys.argv) > 2 else None
    ex = None
    try:
        ex = Execd(binary, **kw)
        for t in tests:
            if only and t.__name__ not in only:
                continue
            t0 = time.time()
            t(ex)
            print("ok   %s (%.2fs)" % (t.__name__, time.time() - t0), flush=True)
        rc = ex.stop()
        check(rc == 0, "execd exit code %d (sanitizer report?)\n%s" % (rc, ex.read_log()))
    except Exception as e:  # noqa: BLE001 - any failure prints the daemon's log
        print("FAIL: %s: %s" % (type(e).__name__, e), flush=True)
        if ex:
            print(ex.read_log()[-4000:])
        sys.exit(1)
    finally:
        if ex:
            ex.close()
        for d in cleanup:
            shutil.rmtree(d, ignore_errors=True)
    sys.exit(0)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def children_of(pid):
    """pids whose parent is pid."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            with contextlib.suppress(OSError):
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
                if int(st[st.rindex(")") + 2:].split()[1]) == pid:
                    out.append(int(d))
    return out


def wait_until(fn, timeout=10, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if fn():
            return
        time.sleep(0.05)
    raise Fail("timed out waiting for " + what)
