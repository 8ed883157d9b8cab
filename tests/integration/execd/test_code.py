#!/usr/bin/env python3
"""sbx-execd code interpreting against a real ipykernel (Debian's python3-ipykernel): the
/code SSE stream event by event, state in a context, stdout/stderr, errors, interrupts, busy
contexts, context CRUD, bash contexts, kernel death, no orphan kernels, no kernel at all."""
import contextlib
import json
import os
import re
import signal
import socket
import stat
import sys
import tempfile
import threading
import time

from harness import SKIP, Execd, check, children_of, parse_events, wait_until

HEX32 = re.compile(r"[0-9a-f]{32}")


def kernel_python():
    for p in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(p) and os.system("%s -c 'import ipykernel' 2>/dev/null" % p) == 0:
            return p
    return None


def code(ex, body, timeout=120):
    st, ev = ex.stream("/code", body, timeout)
    check(st == 200, "POST /code %r: %d %r" % (body, st, ev))
    return ev


def kernel_contract(events, ctx=None):
    """init (context id) first; exactly one terminal event, last; returns the events by type."""
    check(events and events[0]["type"] == "init", "first event %r" % events[:1])
    if ctx:
        check(events[0]["text"] == ctx, "init %r, want context %s" % (events[0], ctx))
    check(sum(e["type"] == "init" for e in events) == 1, "more than one init")
    terminal = [e for e in events if e["type"] in ("execution_complete", "error")]
    check(len(terminal) == 1 and events[-1] is terminal[0],
          "want one terminal event, last: %r" % events)
    return terminal[0]


def types(events):
    return [e["type"] for e in events if e["type"] != "ping"]


def new_context(ex, language="python", **kw):
    c = ex.json("POST", "/code/context", dict(kw, language=language))
    check(HEX32.fullmatch(c["id"]) and c["language"] == language, "context %r" % c)
    return c


def kernel_pids(ex):
    """pids of execd's ipykernel children (local daemons only)."""
    out = []
    for pid in children_of(ex.pid):
        with contextlib.suppress(OSError):
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if b"ipykernel_launcher" in f.read():
                    out.append(pid)
    return out


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


# ---- python ----

def test_two_plus_two(ex):
    c = new_context(ex)
    ev = code(ex, {"context": c, "code": "2+2"})
    kernel_contract(ev, c["id"])
    check(types(ev) == ["init", "execution_count", "result", "execution_complete"],
          "sequence %r" % ev)
    check(ev[1]["execution_count"] == 1, "execution_count %r" % ev[1])
    check(ev[2]["results"] == {"text": "4"}, "results %r" % ev[2])
    check(isinstance(ev[3]["execution_time"], int), "execution_time %r" % ev[3])


def test_state_persists(ex):
    c = new_context(ex)
    code(ex, {"context": c, "code": "x = 42"})
    ev = code(ex, {"context": {"id": c["id"]}, "code": "result = x\nresult"})
    kernel_contract(ev, c["id"])
    check([e["results"]["text"] for e in ev if e["type"] == "result"] == ["42"], "%r" % ev)
    check([e["execution_count"] for e in ev if e["type"] == "execution_count"] == [2],
          "second cell is number 2: %r" % ev)
    other = new_context(ex)
    ev = code(ex, {"context": other, "code": "x"})
    t = kernel_contract(ev, other["id"])
    check(t["type"] == "error" and t["error"]["ename"] == "NameError", "isolation %r" % t)


def test_default_context(ex):
    ev = code(ex, {"context": {"language": "python"}, "code": "y = 7\ny"})
    kernel_contract(ev)
    ctx = ev[0]["text"]
    check(HEX32.fullmatch(ctx), "init carries the default context id %r" % ctx)
    ev = code(ex, {"context": {"language": "python"}, "code": "y * 6"})
    check(ev[0]["text"] == ctx, "same default context")
    check([e["results"]["text"] for e in ev if e["type"] == "result"] == ["42"], "%r" % ev)
    listed = ex.json("GET", "/code/contexts?language=python")
    check({"id": ctx, "language": "python"} in listed, "default listed %r" % listed)


def test_stdout_stderr(ex):
    c = new_context(ex)
    ev = code(ex, {"context": c, "code": "import sys\nprint('hello')\nprint('oops', "
                                           "file=sys.stderr)\nprint('a\\nb')"})
    t = kernel_contract(ev, c["id"])
    check(t["type"] == "execution_complete", "terminal %r" % t)
    out = "".join(e["text"] for e in ev if e["type"] == "stdout")
    err = "".join(e["text"] for e in ev if e["type"] == "stderr")
    check(out == "hello\na\nb\n" and err == "oops\n", "stdout %r stderr %r" % (out, err))
    check("result" not in types(ev), "print has no result: %r" % ev)
    # output of child processes (fd 1) reaches the stream too
    ev = code(ex, {"context": c, "code": "import subprocess\n"
                                         "subprocess.run(['echo', 'from-child'])"})
    out = "".join(e["text"] for e in ev if e["type"] == "stdout")
    check("from-child" in out, "subprocess output %r" % ev)


def test_exception(ex):
    c = new_context(ex)
    ev = code(ex, {"context": c, "code": "print('before')\n1/0"})
    t = kernel_contract(ev, c["id"])
    check(t["type"] == "error", "terminal %r" % t)
    e = t["error"]
    check(e["ename"] == "ZeroDivisionError" and e["evalue"] == "division by zero", "%r" % e)
    check(isinstance(e["traceback"], list) and e["traceback"], "traceback %r" % e)
    check("execution_complete" not in types(ev), "error and execution_complete: %r" % ev)
    check("before\n" in [x.get("text") for x in ev if x["type"] == "stdout"], "output kept")
    ev = code(ex, {"context": c, "code": "print(undefined_variable)"})
    check(kernel_contract(ev)["error"]["ename"] == "NameError", "%r" % ev)
    ev = code(ex, {"context": c, "code": "def f(:\n  pass"})
    check(kernel_contract(ev)["error"]["ename"] == "SyntaxError", "%r" % ev)
    ev = code(ex, {"context": c, "code": "1+1"})
    check(kernel_contract(ev)["type"] == "execution_complete", "usable after errors")


def test_display_data(ex):
    c = new_context(ex)
    ev = code(ex, {"context": c, "code": "from IPython.display import display, HTML\n"
                                         "display(HTML('<b>x</b>'))\n'done'"})
    kernel_contract(ev, c["id"])
    res = [e["results"] for e in ev if e["type"] == "result"]
    check(len(res) == 2 and res[0]["text/html"] == "<b>x</b>" and "text" in res[0],
          "display_data %r" % res)
    check(res[1] == {"text": "'done'"}, "execute_result %r" % res)


class Live:
    """A POST /code whose stream has begun (headers and `init` arrived: the context is
    busy); the rest is read in a thread."""

    def __init__(self, ex, body):
        self.conn = ex.conn(120)
        self.conn.request("POST", "/code", body=json.dumps(body),
                          headers=ex.headers({"Content-Type": "application/json"}))
        r = self.conn.getresponse()
        if r.status != 200:
            check(False, "live run: %d %r" % (r.status, r.read()))
        self.data = b""
        while b'"init"' not in self.data:
            chunk = r.read1(65536)
            check(chunk, "stream ended before init: %r" % self.data)
            self.data += chunk
        self.rest = None
        self.thread = threading.Thread(target=self._read, args=(r,))
        self.thread.start()

    def _read(self, r):
        try:
            self.rest = r.read()
        except OSError as e:
            self.rest = e

    def events(self, timeout=20):
        self.thread.join(timeout)
        check(not self.thread.is_alive(), "the run did not end")
        self.conn.close()
        check(isinstance(self.rest, bytes), "read failed: %r" % self.rest)
        return parse_events(self.data + self.rest)


def test_interrupt_and_busy(ex):
    c = new_context(ex)
    code(ex, {"context": c, "code": "kept = 'yes'"})
    live = Live(ex, {"context": c, "code": "import time\ntime.sleep(30)"})
    st, _, data = ex.request("POST", "/code", {"context": c, "code": "1"})
    body = json.loads(data)
    check(st == 500 and body["code"] == "RUNTIME_ERROR" and "busy" in body["message"],
          "concurrent run: %d %r" % (st, body))
    t0 = time.time()
    st, _, data = ex.request("DELETE", "/code?id=" + c["id"])
    check(st == 200 and data == b"", "interrupt %d %r" % (st, data))
    ev = live.events()
    check(time.time() - t0 < 10, "interrupted run did not return promptly")
    term = kernel_contract(ev, c["id"])
    check(term["type"] == "error" and term["error"]["ename"] == "KeyboardInterrupt",
          "interrupted: %r" % term)
    ev = code(ex, {"context": c, "code": "kept"})
    check([e["results"]["text"] for e in ev if e["type"] == "result"] == ["'yes'"],
          "state survives an interrupt: %r" % ev)
    # DELETE /command?id= is the same dispatcher; an idle context interrupts fine
    check(ex.request("DELETE", "/command?id=" + c["id"])[0] == 200, "idle interrupt")
    st, _, data = ex.request("DELETE", "/code?id=fake-%d" % os.getpid())
    check(st == 500 and json.loads(data)["code"] == "RUNTIME_ERROR", "fake id %d" % st)


def test_client_disconnect(ex):
    c = new_context(ex)
    s = socket.create_connection((ex.host, ex.port), timeout=30)
    body = json.dumps({"context": c, "code": "import time\ntime.sleep(30)\nprint('late')"})
    tok = ("X-EXECD-ACCESS-TOKEN: %s\r\n" % ex.token) if ex.token else ""
    s.sendall(("POST /code HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n%s"
               % (tok, len(body), body)).encode())
    buf = b""
    while b'"init"' not in buf:
        buf += s.recv(65536)
    s.close()
    t0 = time.time()

    def free():
        st, _, data = ex.request("POST", "/code", {"context": c, "code": "'free'"})
        return st == 200
    wait_until(free, 10, "context freed after the client left")
    check(time.time() - t0 < 10, "kernel not interrupted")


def test_kernel_death(ex):
    c = new_context(ex)
    code(ex, {"context": c, "code": "z = 1"})
    ev = code(ex, {"context": c, "code": "import os\nos._exit(3)"})
    t = kernel_contract(ev, c["id"])
    check(t["type"] == "error" and t["error"]["ename"] == "DeadKernelError", "%r" % t)
    check(ex.json("GET", "/code/contexts/" + c["id"])["id"] == c["id"], "context kept")
    ev = code(ex, {"context": c, "code": "'z' in globals()"})
    check([e["results"]["text"] for e in ev if e["type"] == "result"] == ["False"],
          "a new kernel (state lost): %r" % ev)
    check([e["execution_count"] for e in ev if e["type"] == "execution_count"] == [1],
          "new kernel counts from 1: %r" % ev)


def test_delete_while_running(ex):
    c = new_context(ex)
    live = Live(ex, {"context": c, "code": "import time\ntime.sleep(30)"})
    pids = kernel_pids(ex) if not ex.external else []
    check(ex.request("DELETE", "/code/contexts/" + c["id"])[0] == 200, "delete a busy context")
    ev = live.events(10)
    t = kernel_contract(ev, c["id"])
    check(t["type"] == "error" and t["error"]["ename"] == "ContextCancelled", "%r" % t)
    if not ex.external:
        wait_until(lambda: len([p for p in pids if alive(p)]) == len(pids) - 1, 10,
                   "the deleted context's kernel is gone")


def test_kernel_not_reachable_by_others(ex):
    """Security boundary: the kernel's sockets and connection file (with its HMAC key) sit in
    execd's 0700 state dir, so a command run as another user can neither read the key nor
    connect to the kernel."""
    if ex.external or os.getuid() != 0:
        return
    c = new_context(ex)
    state = os.path.join(ex.tmp, "state")
    conn = os.path.join(state, "kernel-%s.json" % c["id"])
    sock = os.path.join(state, "k-%s-1" % c["id"])
    check(os.path.exists(conn) and os.path.exists(sock), "kernel files where expected")
    check(stat.S_IMODE(os.stat(conn).st_mode) == 0o600, "connection file mode")
    probe = ("cat %s; python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); "
             "s.connect(sys.argv[1])' %s" % (conn, sock))
    st, ev = ex.stream("/command", {"command": probe, "uid": 65534})
    err = " ".join(e["text"] for e in ev if e["type"] == "stderr")
    out = [e["text"] for e in ev if e["type"] == "stdout"]
    check(not out and "Permission denied" in err, "uid 65534 reached the kernel: %r %r"
          % (out, err))
    check(ev[-1]["type"] == "error", "probe must fail: %r" % ev[-1])


def test_contexts_crud(ex):
    a = new_context(ex)
    b = new_context(ex, "bash", cwd="/tmp")
    check(b.get("cwd") == "/tmp", "cwd echoed %r" % b)
    listed = ex.json("GET", "/code/contexts")
    check({"id": a["id"], "language": "python"} in listed and
          {"id": b["id"], "language": "bash"} in listed, "list %r" % listed)
    py = ex.json("GET", "/code/contexts?language=python")
    check(all(x["language"] == "python" for x in py) and
          any(x["id"] == a["id"] for x in py), "python list %r" % py)
    check(ex.json("GET", "/code/contexts/" + a["id"]) == {"id": a["id"], "language": "python"},
          "get")
    before = set(kernel_pids(ex)) if not ex.external else set()
    st, _, data = ex.request("DELETE", "/code/contexts/" + a["id"])
    check(st == 200 and data == b"", "delete %d %r" % (st, data))
    st, _, data = ex.request("GET", "/code/contexts/" + a["id"])
    check(st == 404 and json.loads(data)["code"] == "CONTEXT_NOT_FOUND", "deleted: %d" % st)
    st, _, data = ex.request("DELETE", "/code/contexts/" + a["id"])
    check(st == 404 and json.loads(data)["code"] == "CONTEXT_NOT_FOUND", "twice: %d" % st)
    if not ex.external:
        wait_until(lambda: len(set(kernel_pids(ex))) == len(before) - 1, 10, "kernel killed")
    st, _, data = ex.request("DELETE", "/code/contexts")
    check(st == 400 and json.loads(data)["code"] == "MISSING_QUERY", "no language %d" % st)
    new_context(ex)
    check(ex.request("DELETE", "/code/contexts?language=python")[0] == 200, "bulk delete")
    check(ex.json("GET", "/code/contexts?language=python") == [], "python contexts left")
    if not ex.external:
        wait_until(lambda: kernel_pids(ex) == [], 10, "every kernel killed")
    check(any(x["id"] == b["id"] for x in ex.json("GET", "/code/contexts")), "bash kept")
    check(ex.request("DELETE", "/code/contexts?language=bash")[0] == 200, "bash delete")


# ---- shells ----

def test_bash_context(ex):
    c = new_context(ex, "bash")
    ev = code(ex, {"context": c, "code": "export FOO=hello\ncd /tmp\necho step1"})
    t = kernel_contract(ev, c["id"])
    check(t["type"] == "execution_complete", "%r" % ev)
    ev = code(ex, {"context": c, "code": "echo \"$FOO\"; pwd; echo err >&2"})
    kernel_contract(ev, c["id"])
    out = [e["text"] for e in ev if e["type"] == "stdout"]
    check(out == ["hello", "/tmp", "err"], "state kept (stderr merged as in sessions) %r" % out)
    ev = code(ex, {"context": c, "code": "exit 3"})
    t = kernel_contract(ev)
    check(t["type"] == "error" and t["error"]["evalue"] == "3", "exit code %r" % t)
    # the default bash context (JS SDK e2e: env across sequential runs without a context)
    for snippet in ("export FOO=hello\nexport BAR=world\n", 'printf "step1:$FOO:$BAR\\n"\n'):
        ev = code(ex, {"context": {"language": "bash"}, "code": snippet})
    check([e["text"] for e in ev if e["type"] == "stdout"] == ["step1:hello:world"], "%r" % ev)
    # interrupting a bash context stops its command, the context stays
    live = Live(ex, {"context": c, "code": "sleep 30"})
    st, _, data = ex.request("POST", "/code", {"context": c, "code": "true"})
    check(st == 500 and "busy" in json.loads(data)["message"], "busy bash context %d" % st)
    check(ex.request("DELETE", "/code?id=" + c["id"])[0] == 200, "interrupt bash")
    ev = live.events()
    check(kernel_contract(ev, c["id"])["type"] == "error", "interrupted %r" % ev)
    ev = code(ex, {"context": c, "code": "echo $FOO"})
    check([e["text"] for e in ev if e["type"] == "stdout"] == ["hello"], "context kept")


def test_command_language(ex):
    for ctx in (None, {"language": "command"}, {"language": ""}, {}):
        body = {"code": "echo hi; echo there >&2"}
        if ctx is not None:
            body["context"] = ctx
        ev = code(ex, body)
        check(types(ev) == ["init", "stdout", "stderr", "execution_complete"], "%r" % ev)
        check(HEX32.fullmatch(ev[0]["text"]), "a command id %r" % ev[0])
        check(ev[1]["text"] == "hi" and ev[2]["text"] == "there", "%r" % ev)
    c = new_context(ex, "command")
    code(ex, {"context": c, "code": "cd /usr"})
    ev = code(ex, {"context": c, "code": "pwd"})
    check([e["text"] for e in ev if e["type"] == "stdout"] == ["/usr"], "command context %r" % ev)


def test_languages_and_hostile_input(ex):
    for lang in ("java", "javascript", "typescript", "go", "sql"):
        st, _, data = ex.request("POST", "/code", {"context": {"language": lang}, "code": "1"})
        body = json.loads(data)
        check(st == 500 and body["code"] == "RUNTIME_ERROR" and
              "python, bash, command" in body["message"], "%s: %d %r" % (lang, st, body))
        st, _, data = ex.request("POST", "/code/context", {"language": lang})
        check(st == 500 and "python, bash, command" in json.loads(data)["message"], lang)
    st, _, data = ex.request("POST", "/code", {"context": {"language": "cobol"}, "code": "1"})
    check(st == 400 and "python, bash, command" in json.loads(data)["message"], "unknown %d" % st)
    c = new_context(ex)
    cases = [
        ("POST", "/code", '{"code": ', 400, "INVALID_REQUEST_BODY"),
        ("POST", "/code", '', 400, "INVALID_REQUEST_BODY"),
        ("POST", "/code", '[1]', 400, "INVALID_REQUEST_BODY"),
        ("POST", "/code", '{}', 400, "INVALID_REQUEST_BODY"),
        ("POST", "/code", '{"code": ""}', 400, "INVALID_REQUEST_BODY"),
        ("POST", "/code", '{"code": 5}', 400, "INVALID_REQUEST_BODY"),
        ("POST", "/code", '{"code": "1\\u0000"}', 400, "INVALID_REQUEST_BODY"),
        ("POST", "/code", '{"code": "1", "context": "x"}', 400, "INVALID_REQUEST_BODY"),
        ("POST", "/code", '{"code": "1", "context": {"id": 5}}', 400, "INVALID_REQUEST_BODY"),
        ("POST", "/code", '{"code": "1", "context": {"id": "nope"}}', 404, "CONTEXT_NOT_FOUND"),
        ("POST", "/code", json.dumps({"code": "1", "context": {"id": c["id"],
                                                              "language": "bash"}}),
         400, "INVALID_REQUEST_BODY"),
        ("POST", "/code/context", '{"language": 5}', 400, "INVALID_REQUEST_BODY"),
        ("POST", "/code/context", '{"cwd": []}', 400, "INVALID_REQUEST_BODY"),
        ("POST", "/code/context", 'nope', 400, "INVALID_REQUEST_BODY"),
        ("POST", "/code/context", '', 400, "INVALID_REQUEST_BODY"),
        ("DELETE", "/code", None, 400, "MISSING_QUERY"),
        ("DELETE", "/code?id=", None, 400, "MISSING_QUERY"),
        ("GET", "/code/contexts/nope", None, 404, "CONTEXT_NOT_FOUND"),
        ("PUT", "/code", "", 405, "METHOD_NOT_ALLOWED"),
    ]
    for method, path, body, want, want_code in cases:
        st, _, data = ex.request(method, path, body)
        check(st == want, "%s %s %r: %d, want %d" % (method, path, body, st, want))
        got = json.loads(data)
        check(got["code"] == want_code and got["message"], "%s %s %r: %r" % (method, path,
                                                                             body, got))
    ev = code(ex, {"context": c, "code": "'still fine'", "unknown": [1]})
    check(kernel_contract(ev)["type"] == "execution_complete", "after the hostile table")


def test_idle_with_kernel(ex):
    """A ready kernel adds no timers to execd: an idle daemon still uses no CPU."""
    if ex.external:
        return
    new_context(ex)

    def cpu():
        with open("/proc/%d/stat" % ex.pid) as f:
            v = f.read().split(")")[-1].split()
        return int(v[11]) + int(v[12])
    time.sleep(0.3)
    a = cpu()
    time.sleep(2)
    check(cpu() - a <= 1, "execd used CPU while idle with a kernel: %d ticks" % (cpu() - a))


# ---- own daemons ----

def own(binary, args=(), env=None):
    return Execd(binary, args=args, external_ok=False, env=env)


def test_no_orphan_kernels(binary):
    for how in ("SIGTERM", "SIGKILL"):
        ex = own(binary)
        try:
            for _ in range(2):
                new_context(ex)
            pids = kernel_pids(ex)
            check(len(pids) == 2, "two kernels %r" % pids)
            if how == "SIGTERM":
                check(ex.stop() == 0, "exit code after SIGTERM")
            else:
                os.kill(ex.pid, signal.SIGKILL)  # PR_SET_PDEATHSIG takes the kernels along
                ex.proc.wait()
            wait_until(lambda: not any(alive(p) for p in pids), 10, "kernels gone (%s)" % how)
        finally:
            ex.close()


def fake_python(d, name="python3"):
    """An interpreter without ipykernel, as the first python3 on PATH here is."""
    p = os.path.join(d, name)
    with open(p, "w") as f:
        f.write("#!/bin/sh\necho \"$0: No module named ipykernel_launcher\" >&2\nexit 1\n")
    os.chmod(p, stat.S_IRWXU)
    return p


def test_no_kernel_available(binary):
    d = tempfile.mkdtemp(prefix="execd-nokernel-")
    for args in (["--python", fake_python(d)], ["--python", "/nonexistent-sbx/python3"]):
        ex = own(binary, args)
        try:
            for path, body in (("/code", {"context": {"language": "python"}, "code": "1"}),
                               ("/code/context", {"language": "python"})):
                st, _, data = ex.request("POST", path, body)
                got = json.loads(data)
                check(st == 500 and got["code"] == "RUNTIME_ERROR" and
                      "language runtime server not configured" in got["message"],
                      "%s: %d %r" % (path, st, got))
                if "nonexistent" in args[1]:
                    check("ipykernel" in got["message"] and "nonexistent" in got["message"],
                          "why %r" % got)
                else:
                    check("No module named ipykernel_launcher" in got["message"], "%r" % got)
            check(ex.json("GET", "/code/contexts") == [], "failed contexts are not kept")
            ev = code(ex, {"context": {"language": "bash"}, "code": "echo ok"})
            check([e["text"] for e in ev if e["type"] == "stdout"] == ["ok"], "bash still works")
            check(ex.stop() == 0, "exit code")
        finally:
            ex.close()
    with contextlib.suppress(OSError):
        for f in os.listdir(d):
            os.unlink(os.path.join(d, f))
        os.rmdir(d)


def test_python_search(binary, good):
    """The first python3 on PATH lacks ipykernel: execd moves on to one that has it."""
    d = tempfile.mkdtemp(prefix="execd-pysearch-")
    fake_python(d)
    env = dict(os.environ, PATH="%s:%s:/usr/bin:/bin" % (d, os.path.dirname(good)))
    env.pop("EXECD_PYTHON", None)
    ex = own(binary, env=env)
    try:
        ev = code(ex, {"context": {"language": "python"}, "code": "import sys\nsys.executable"})
        res = [e["results"]["text"] for e in ev if e["type"] == "result"]
        check(res and "python3" in res[0] and d not in res[0], "kernel python %r" % res)
        check(ex.stop() == 0, "exit code")
    finally:
        ex.close()
        os.unlink(os.path.join(d, "python3"))
        os.rmdir(d)


def proc_start(pid):
    """A process's start time in clock ticks since boot (/proc/PID/stat field 22)."""
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().split(")")[-1].split()[19])


def test_warm_kernel(binary, good):
    """SBX_WARM_KERNEL=python: a kernel runs before any context exists; the first Python
    context without a cwd gets that very process, the next one (and one with a cwd) a new
    kernel; a bad value only warns."""
    env = dict(os.environ, SBX_WARM_KERNEL="python")
    ex = own(binary, ["--python", good], env=env)
    try:
        wait_until(lambda: "warm kernel ready" in ex.read_log(), 60, "the warm kernel ready")
        warm = kernel_pids(ex)
        check(len(warm) == 1, "one kernel before any context: %r" % warm)
        ev = code(ex, {"context": {"language": "python"}, "code": "import os\nos.getpid()"})
        res = [e["results"]["text"] for e in ev if e["type"] == "result"]
        check(res and int(res[0]) == warm[0], "the first result came from the warm kernel: %r"
              % res)
        c = new_context(ex)
        ev = code(ex, {"context": {"id": c["id"], "language": "python"},
                       "code": "import os\nos.getpid()"})
        res2 = [e["results"]["text"] for e in ev if e["type"] == "result"]
        check(res2 and int(res2[0]) != warm[0], "a second context: its own kernel")
        d = tempfile.mkdtemp(prefix="execd-warm-cwd-")
        c2 = new_context(ex, cwd=d)
        ev = code(ex, {"context": {"id": c2["id"], "language": "python"},
                       "code": "import os\nos.getcwd()"})
        check([e["results"]["text"] for e in ev if e["type"] == "result"] == [repr(d)],
              "a context with a cwd runs there")
        os.rmdir(d)
        check(ex.stop() == 0, "exit code")
    finally:
        ex.close()
    ex = own(binary, ["--python", good], env=dict(os.environ, SBX_WARM_KERNEL="ruby"))
    try:
        wait_until(lambda: "SBX_WARM_KERNEL=ruby: only `python` is known" in ex.read_log(), 10,
                   "a warning for an unknown value")
        check(kernel_pids(ex) == [], "no kernel for an unknown value")
        check(ex.stop() == 0, "exit code")
    finally:
        ex.close()


def main():
    binary = sys.argv[1]
    good = kernel_python()
    if not good:
        print("SKIP: no python3 with ipykernel (scripts/deps.sh installs python3-ipykernel)")
        sys.exit(SKIP)
    shared = [test_two_plus_two, test_state_persists, test_default_context, test_stdout_stderr,
              test_exception, test_display_data, test_interrupt_and_busy, test_client_disconnect,
              test_kernel_death, test_delete_while_running, test_kernel_not_reachable_by_others,
              test_contexts_crud, test_bash_context, test_command_language,
              test_languages_and_hostile_input, test_idle_with_kernel]
    only = sys.argv[2:]
    ex = None
    try:
        ex = Execd(binary, args=["--python", good, "--log-level", "debug"])
        for t in shared:
            if only and t.__name__ not in only:
                continue
            t0 = time.time()
            t(ex)
            print("ok   %s (%.2fs)" % (t.__name__, time.time() - t0), flush=True)
        if not ex.external:
            check(ex.stop() == 0, "execd exit code (sanitizer report?)\n" + ex.read_log())
            for t, a in ((test_no_orphan_kernels, ()), (test_no_kernel_available, ()),
                         (test_python_search, (good,)), (test_warm_kernel, (good,))):
                if only and t.__name__ not in only:
                    continue
                t0 = time.time()
                t(binary, *a)
                print("ok   %s (%.2fs)" % (t.__name__, time.time() - t0), flush=True)
    except Exception as e:  # noqa: BLE001 - any failure prints the daemon's log
        print("FAIL: %s: %s" % (type(e).__name__, e), flush=True)
        if ex:
            print(ex.read_log()[-6000:])
        sys.exit(1)
    finally:
        if ex:
            ex.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
