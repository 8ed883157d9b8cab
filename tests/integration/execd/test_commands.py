#!/usr/bin/env python3
"""sbx-execd commands: the SSE contract event by event, status, background logs with the
byte cursor, interrupts, timeouts (the whole process group), sessions."""
import contextlib
import json
import os
import re
import socket
import tempfile
import threading
import time

from harness import Fail, check, check_contract, run_tests, wait_until


def test_ping(ex):
    st, h, body = ex.request("GET", "/ping")
    check(st == 200 and body == b"", "ping: %d %r" % (st, body))


def test_echo_contract(ex):
    st, events = ex.stream("/command", {"command": "echo hi"})
    check(st == 200, "status %d %r" % (st, events))
    cid, code, out, err = check_contract(events)
    check(re.fullmatch(r"[0-9a-f]{32}", cid), "command id %r" % cid)
    check(code == 0 and out == ["hi"] and err == [], "events %r" % events)
    check([e["type"] for e in events] == ["init", "stdout", "execution_complete"],
          "sequence %r" % events)


def test_lines_and_exit_code(ex):
    cmd = r"echo out1; echo err1 >&2; printf 'a\r\nb\n\nc'; echo err2 >&2; exit 3"
    st, events = ex.stream("/command", {"command": cmd, "unknown_field": [1, 2]})
    check(st == 200, "status %d" % st)
    _, code, out, err = check_contract(events)
    check(code == 3, "exit code %d" % code)
    check(out == ["out1", "a", "b", "\n", "c"], "stdout lines %r" % out)
    check(err == ["err1", "err2"], "stderr lines %r" % err)
    t = events[-1]["error"]
    check(t["evalue"] == "3" and t["traceback"] == ["exit status 3"], "error %r" % t)


def test_not_found_127(ex):
    st, events = ex.stream("/command", {"command": "no-such-command-sbx"})
    _, code, _, err = check_contract(events)
    check(code == 127 and err, "exit %d stderr %r" % (code, err))


def test_binary_and_long_lines(ex):
    cmd = "printf '\\377\\001x\\n'; head -c 40000 /dev/zero | tr '\\0' y; echo"
    st, events = ex.stream("/command", {"command": cmd})
    _, code, out, _ = check_contract(events)
    check(out[0] == "\ufffd\u0001x", "invalid UTF-8 not replaced: %r" % out[0])
    check("".join(out[1:]) == "y" * 40000, "long line lost bytes")


def test_cwd_envs(ex):
    # created through the API so this also works against an execd inside a sandbox
    d = "/tmp/execd-test-%d/work dir" % os.getpid()
    ex.json("POST", "/directories", {d: {"mode": 755}})
    st, events = ex.stream("/command", {"command": "pwd; echo \"$FOO|$BAR\"", "cwd": d,
                                        "envs": {"FOO": "foo bar", "BAR": "2"}})
    _, code, out, _ = check_contract(events)
    check(out == [d, "foo bar|2"], "cwd/envs %r" % out)
    st, body = ex.stream("/command", {"command": "pwd", "cwd": "/nonexistent-sbx"})
    check(st in (400, 500), "missing cwd: %d" % st)
    check(json.loads(body)["code"] == "RUNTIME_ERROR", "missing cwd body %r" % body)
    ex.request("DELETE", "/directories?path=/tmp/execd-test-%d" % os.getpid())


def test_bad_requests(ex):
    for body in ['{"command": 5}', '{}', '{"command":"true","timeout":"x"}', '[1]',
                 '{"command":"true","envs":{"A":1}}', '{"command":"true","gid":5}',
                 '{"command":"true","background":"yes"}', '{"command": "tr', '']:
        st, _, data = ex.request("POST", "/command", body)
        check(st == 400, "body %r: status %d" % (body, st))
        check(json.loads(data)["code"] == "INVALID_REQUEST_BODY", "code for %r" % body)


def test_status_foreground(ex):
    st, events = ex.stream("/command", {"command": "exit 7"})
    cid = events[0]["text"]
    s = ex.json("GET", "/command/status/" + cid)
    check(s["id"] == cid and s["content"] == "exit 7" and s["running"] is False, "%r" % s)
    check(s["exit_code"] == 7 and "finished_at" in s and "started_at" in s, "%r" % s)
    st, _, data = ex.request("GET", "/command/status/nope")
    check(st == 404, "unknown status: %d" % st)
    st, _, data = ex.request("GET", "/command/%s/logs" % cid)
    check(st == 400, "logs of a foreground command: %d" % st)


def pid_alive(ex, pid):
    """Ask the daemon's own view (it may run in another pid namespace): alive and not a zombie."""
    cmd = "s=$(cat /proc/%d/stat 2>/dev/null) || exit 0; set -- ${s##*)}; [ \"$1\" != Z ] && echo alive" % pid
    _, events = ex.stream("/command", {"command": cmd})
    return any(e.get("type") == "stdout" and e.get("text") == "alive" for e in events)


def test_timeout_kills_group(ex):
    t0 = time.time()
    st, events = ex.stream("/command", {"command": "sleep 100 & echo $!; sleep 100",
                                        "timeout": 700})
    check(time.time() - t0 < 5, "timeout took %.1fs" % (time.time() - t0))
    _, code, out, _ = check_contract(events)
    check(code == -1, "timed out command exit code %d" % code)
    grandchild = int(out[0])
    wait_until(lambda: not pid_alive(ex, grandchild), 5, "grandchild %d to die" % grandchild)


def test_background_logs_cursor(ex):
    cmd = "for i in 1 2 3 4 5; do echo line$i; echo err$i >&2; sleep 0.1; done; exit 2"
    st, events = ex.stream("/command", {"command": cmd, "background": True})
    check([e["type"] for e in events] == ["init", "execution_complete"], "%r" % events)
    cid = events[0]["text"]
    s = ex.json("GET", "/command/status/" + cid)
    check(s["running"] is True and "exit_code" not in s, "status while running %r" % s)
    got, cursor = b"", 0
    deadline = time.time() + 10
    while time.time() < deadline:
        st, h, data = ex.request("GET", "/command/%s/logs?cursor=%d" % (cid, cursor))
        check(st == 200 and h["content-type"].startswith("text/plain"), "logs %d" % st)
        got += data
        check(int(h["execd-commands-tail-cursor"]) == cursor + len(data), "cursor header")
        cursor = int(h["execd-commands-tail-cursor"])
        if not ex.json("GET", "/command/status/" + cid)["running"] and not data:
            break
        time.sleep(0.05)
    want = "".join("line%d\nerr%d\n" % (i, i) for i in range(1, 6)).encode()
    check(got == want, "merged log %r" % got)
    st, h, data = ex.request("GET", "/command/%s/logs" % cid)
    check(data == want, "full log without cursor")
    st, h, data = ex.request("GET", "/command/%s/logs?cursor=99999" % cid)
    check(data == b"" and int(h["execd-commands-tail-cursor"]) == len(want), "cursor past end")
    s = ex.json("GET", "/command/status/" + cid)
    check(s["exit_code"] == 2 and s["running"] is False, "final status %r" % s)


def test_interrupt_background(ex):
    st, events = ex.stream("/command", {"command": "sleep 30", "background": True})
    cid = events[0]["text"]
    st, _, _ = ex.request("DELETE", "/command?id=" + cid)
    check(st == 200, "interrupt: %d" % st)
    wait_until(lambda: not ex.json("GET", "/command/status/" + cid)["running"], 10,
               "interrupted command to stop")
    check(ex.json("GET", "/command/status/" + cid)["exit_code"] == -1, "signal exit code")
    st, _, data = ex.request("DELETE", "/command?id=" + cid)
    check(st == 500 and json.loads(data)["code"] == "RUNTIME_ERROR", "second interrupt %d" % st)
    st, _, data = ex.request("DELETE", "/command")
    check(st == 400 and json.loads(data)["code"] == "MISSING_QUERY", "no id: %d" % st)


def stream_raw(ex, body):
    """Start a POST /command on a raw socket; returns (socket, init event)."""
    s = socket.create_connection((ex.host, ex.port))
    data = json.dumps(body).encode()
    hdr = "POST /command HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    if ex.token:
        hdr += "X-EXECD-ACCESS-TOKEN: %s\r\n" % ex.token
    s.sendall((hdr + "Content-Length: %d\r\n\r\n" % len(data)).encode() + data)
    buf = b""
    while b'"init"' not in buf or not re.search(rb'"init".*?\}\n\n', buf):
        chunk = s.recv(65536)
        if not chunk:
            raise Fail("connection closed before init")
        buf += chunk
    m = re.search(rb'\{"type":"init"[^\n]*\}', buf)
    return s, json.loads(m.group(0)), buf


def test_interrupt_foreground(ex):
    s, init, buf = stream_raw(ex, {"command": "trap '' TERM; echo ready; sleep 60"})
    cid = init["text"]
    while b'"ready"' not in buf:
        buf += s.recv(65536)
    t0 = time.time()
    st, _, _ = ex.request("DELETE", "/command?id=" + cid)
    check(st == 200, "interrupt %d" % st)
    s.settimeout(20)
    while b"0\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    s.close()
    check(time.time() - t0 < 10, "interrupt took %.1fs" % (time.time() - t0))
    check(time.time() - t0 > 2, "SIGKILL came before the grace")
    check(b'"evalue":"-1"' in buf and b'signal: killed' in buf, "interrupted stream %r" % buf[-300:])


def test_sessions(ex):
    sid = ex.json("POST", "/session", "")["session_id"]
    check(re.fullmatch(r"[0-9a-f-]{36}", sid), "session id %r" % sid)
    st, ev = ex.stream("/session/%s/run" % sid, {"command": "export A=one; cd /tmp; echo x >&2"})
    init, code, out, err = check_contract(ev)
    check(init == sid, "a session run's init carries the session id (COMPAT 2.3): %r" % init)
    check(code == 0 and out == ["x"] and err == [], "stderr merged into stdout: %r" % ev)
    st, ev = ex.stream("/session/%s/run" % sid, {"command": "echo $A; pwd"})
    _, code, out, _ = check_contract(ev)
    check(out == ["one", "/tmp"], "session state not kept: %r" % out)
    st, ev = ex.stream("/session/%s/run" % sid, {"command": "pwd", "cwd": "/"})
    check(check_contract(ev)[2] == ["/"], "cwd override")
    st, ev = ex.stream("/session/%s/run" % sid, {"command": "B=two; export B; exit 4"})
    _, code, _, _ = check_contract(ev)
    check(code == 4, "session exit code %d" % code)
    st, ev = ex.stream("/session/%s/run" % sid, {"command": "echo $B"})
    check(check_contract(ev)[2] == ["two"], "state saved on exit")
    sid2 = ex.json("POST", "/session", {"cwd": "/usr"})["session_id"]
    st, ev = ex.stream("/session/%s/run" % sid2, {"command": "pwd; echo ${A:-unset}"})
    check(check_contract(ev)[2] == ["/usr", "unset"], "sessions are separate / initial cwd")
    st, ev = ex.stream("/session/%s/run" % sid2, {"command": "sleep 1", "timeout": 200})
    check(check_contract(ev)[1] == -1, "session timeout")
    check(ex.request("DELETE", "/session/" + sid)[0] == 200, "delete session")
    st, _, data = ex.request("DELETE", "/session/" + sid)
    check(st == 404 and json.loads(data)["code"] == "CONTEXT_NOT_FOUND", "delete twice %d" % st)
    st, _ = ex.stream("/session/%s/run" % sid, {"command": "true"})
    check(st == 404, "run on deleted session %d" % st)
    check(ex.request("DELETE", "/command?id=" + sid2)[0] == 200, "interrupt closes a session")
    check(ex.request("DELETE", "/session/" + sid2)[0] == 404, "closed session is gone")


ENVS_DIR = tempfile.mkdtemp(prefix="execd-envs-%d-" % os.getpid())
ENVS_FILE = os.path.join(ENVS_DIR, "env")


def test_envs_file(ex):
    if ex.external:
        return
    with open(ENVS_FILE, "w") as f:
        f.write("# comment\nFROM_FILE=one\nexport QUOTED=\"two words\"\n"
                "EXPANDED=${FROM_FILE}-x\nOVERRIDE=file\n")
    st, ev = ex.stream("/command", {"command": "echo $FROM_FILE; echo $QUOTED; echo $EXPANDED; "
                                    "echo $OVERRIDE", "envs": {"OVERRIDE": "request"}})
    check(check_contract(ev)[2] == ["one", "two words", "one-x", "request"],
          "EXECD_ENVS file: %r" % ev)


def test_uid_gid(ex):
    if os.getuid() != 0:
        return
    st, ev = ex.stream("/command", {"command": "id -u; id -g", "uid": 65534})
    _, code, out, _ = check_contract(ev)
    check(out[0] == "65534", "uid not applied: %r" % out)
    st, ev = ex.stream("/command", {"command": "id -u; id -g; id -G", "uid": 65534, "gid": 12})
    _, code, out, _ = check_contract(ev)
    check(out[:2] == ["65534", "12"] and out[2] == "12", "uid/gid: %r" % out)


def test_self_proxy(ex):
    st, ev = ex.stream("/proxy/%d/command" % ex.port, {"command": "echo proxied"})
    check(st == 200 and check_contract(ev)[2] == ["proxied"], "self-proxy %r" % (ev,))
    st, _, _ = ex.request("GET", "/proxy/%d/ping" % ex.port)
    check(st == 200, "self-proxy ping")


def test_concurrent_100(ex):
    results = [None] * 100

    def one(i):
        try:
            st, ev = ex.stream("/command", {"command": "echo n%d; sleep 0.2" % i})
            results[i] = check_contract(ev)[2]
        except Exception as e:  # noqa: BLE001 - reported below
            results[i] = e

    threads = [threading.Thread(target=one, args=(i,)) for i in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for i, r in enumerate(results):
        check(r == ["n%d" % i], "command %d: %r" % (i, r))


def direct_count(ex):
    """How many commands execd exec'd without bash so far (its debug log; local only)."""
    return len(re.findall(r"direct exec of [^\n]*: started", ex.read_log()))


def run_out(ex, cmd, **kw):
    body = dict(kw, command=cmd)
    st, ev = ex.stream("/command", body)
    check(st == 200, "%r: status %d %r" % (cmd, st, ev))
    return check_contract(ev)


def test_direct_exec_env(ex):
    """`env` (plain words: exec'd directly where the shell is bash 5.2) sees exactly the
    variables `"env"` (quoted: always through bash, which execs it) sees."""
    d = "/tmp/execd-direct-%d" % os.getpid()
    ex.json("POST", "/directories", {d: {"mode": 755}})
    cases = [
        {},
        {"cwd": d},
        {"cwd": d, "envs": {"PWD": "/", "OLDPWD": "/usr", "SHLVL": "5", "_": "x", "Z": "1"}},
        {"cwd": d, "envs": {"PWD": d + "/.", "OLDPWD": "/nonexistent-sbx", "SHLVL": ""}},
        {"envs": {"SHLVL": "998", "LC_ALL": "C", "odd-name": "v"}},
        {"envs": {"IFS": "x", "BASH_ENV": "/nonexistent-sbx"}},  # bash for both
    ]
    for kw in cases:
        pairs = [("env", '"env"')]
        if not ex.external:  # a BusyBox root has no /usr/bin/env
            pairs.append(("/usr/bin/env", "'/usr/bin/env'"))
        for direct, viabash in pairs:
            before = direct_count(ex)
            _, code, fast, _ = run_out(ex, direct, **kw)
            used = direct_count(ex) - before
            _, code2, slow, _ = run_out(ex, viabash, **kw)
            check(code == code2 == 0, "exit codes %d %d" % (code, code2))
            check(sorted(fast) == sorted(slow),
                  "env differs for %r:\n direct %r\n bash   %r" % (kw, sorted(fast), sorted(slow)))
            if not ex.external and BASH52:
                want = 0 if "IFS" in kw.get("envs", {}) else 1
                check(used == want, "%r %r: %d direct execs, want %d" % (direct, kw, used, want))
    ex.request("DELETE", "/directories?path=" + d)


def test_direct_exec_shell_semantics(ex):
    """Whatever needs the shell still gets it; both paths keep the SSE contract."""
    d = "/tmp/execd-direct2-%d" % os.getpid()
    ex.json("POST", "/directories", {d: {"mode": 755}})
    cases = [
        # command, expected exit code, expected stdout, goes direct (bash 5.2 only)
        ("true", 0, [], True),
        ("false", 1, [], True),
        ("true --help", 0, [], False),          # the builtin ignores arguments
        ("ls -d /", 0, ["/"], True),
        ("cd /tmp", 0, [], False),
        ("echo $HOME", 0, ["/sbx-home"], False),
        ("ls -d /us*", 0, ["/usr"], False),
        ("echo a | tr a b", 0, ["b"], False),
        ("exit 3", 3, [], False),
        ("FOO=bar env", 0, None, False),
        ("no-such-command-sbx", 127, [], False),
        ("printf x", 0, ["x"], False),
        ("  ls   -d   /  ", 0, ["/"], True),
        (d + "/noshebang", 0, ["from-script"], False),  # ENOEXEC: bash runs it as a script
        ("sbx-rel-cmd", 0, ["relative"], False),          # found via PATH="." only
    ]
    script = d + "/noshebang"
    run_out(ex, "printf 'echo from-script\\n' > %s; chmod +x %s" % (script, script))
    run_out(ex, "printf '#!/bin/sh\\necho relative\\n' > %s/sbx-rel-cmd; chmod +x %s/sbx-rel-cmd"
            % (d, d))
    for cmd, want_code, want_out, direct in cases:
        kw = {"envs": {"HOME": "/sbx-home"}}
        if cmd == "sbx-rel-cmd":
            kw = {"cwd": d, "envs": {"PATH": ".:/usr/bin:/bin"}}
        before = direct_count(ex)
        _, code, out, _ = run_out(ex, cmd, **kw)
        used = direct_count(ex) - before
        check(code == want_code, "%r: exit %d, want %d" % (cmd, code, want_code))
        if cmd == "FOO=bar env":
            check("FOO=bar" in out, "assignment prefix lost: %r" % out)
        else:
            check(out == want_out, "%r: stdout %r, want %r" % (cmd, out, want_out))
        if not ex.external and BASH52:
            check(used == (1 if direct else 0), "%r: direct execs %d" % (cmd, used))
    # the SSE contract is the same on both paths, event by event
    for cmd in ("ls -d /", "ls -d / ;"):
        st, events = ex.stream("/command", {"command": cmd})
        check([e["type"] for e in events] == ["init", "stdout", "execution_complete"],
              "%r: sequence %r" % (cmd, events))
        check(events[1]["text"] == "/", "%r: %r" % (cmd, events))
    for cmd in ("ls /nonexistent-sbx", "ls /nonexistent-sbx;"):
        st, events = ex.stream("/command", {"command": cmd})
        _, code, out, err = check_contract(events)
        check(code != 0 and len(err) == 1 and not out, "%r: %r" % (cmd, events))
    # background commands take the direct path too
    st, ev = ex.stream("/command", {"command": "ls -d /", "background": True})
    cid = check_contract(ev)[0]
    wait_until(lambda: not ex.json("GET", "/command/status/" + cid)["running"], what="bg done")
    st, _, data = ex.request("GET", "/command/%s/logs?cursor=0" % cid)
    check(data == b"/\n", "background output %r" % data)
    ex.request("DELETE", "/directories?path=" + d)


def bash_is_52():
    with contextlib.suppress(OSError):
        with open("/bin/bash", "rb") as f:
            m = re.search(rb"@\(#\)Bash version (\d+)\.(\d+)", f.read())
        return bool(m) and int(m.group(1)) == 5 and int(m.group(2)) >= 2
    return False


BASH52 = bash_is_52()


if __name__ == "__main__":
    run_tests([test_ping, test_echo_contract, test_lines_and_exit_code, test_not_found_127,
               test_binary_and_long_lines, test_cwd_envs, test_bad_requests,
               test_status_foreground, test_timeout_kills_group, test_background_logs_cursor,
               test_interrupt_background, test_interrupt_foreground, test_sessions,
               test_envs_file, test_uid_gid, test_self_proxy, test_concurrent_100,
               test_direct_exec_env, test_direct_exec_shell_semantics],
              args=["--envs-file", ENVS_FILE, "--log-level", "debug"], cleanup=[ENVS_DIR])
