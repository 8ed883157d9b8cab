"""PTY sessions (COMPAT 2.2 /pty, 2.6): create, attach over WebSocket, output, stdin, resize,
signals, exit codes, replay with since=, one client (409, takeover 4001), read-only viewers,
pipe mode, a flooded pty with slow and dead readers (execd's memory bounded), bad frames.

    test_pty.py EXECD_BIN     (or EXECD_URL=http://host:port for a running execd)
"""
import json
import os
import socket
import struct
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "desktop"))
import harness  # noqa: E402
from cdp import HandshakeError  # noqa: E402
from harness import check, rss_kib  # noqa: E402
from ptyclient import Term  # noqa: E402


def new_session(ex, body=None):
    r = ex.json("POST", "/pty", body if body is not None else {}, expect=201)
    check(set(r) == {"session_id"}, "create answer: %r" % r)
    return r["session_id"]


def test_crud(ex):
    sid = new_session(ex)
    info = ex.json("GET", "/pty/" + sid)
    check(info == {"session_id": sid, "running": False, "output_offset": 0}, "info %r" % info)
    st, _, _ = ex.request("POST", "/pty", body=b"")
    check(st == 201, "empty body create: %d" % st)
    for bad in (b"[1]", b"{bad", json.dumps({"cwd": 5}).encode(),
                json.dumps({"cwd": "/no/such/dir"}).encode(), json.dumps({"command": []}).encode()):
        st, _, body = ex.request("POST", "/pty", body=bad)
        check(st == 400, "create %r: %d %r" % (bad, st, body))
    for m in ("GET", "DELETE"):
        st, _, _ = ex.request(m, "/pty/nope")
        check(st == 404, "%s unknown: %d" % (m, st))
    try:
        Term(ex, "nope")
        raise harness.Fail("attach to an unknown session succeeded")
    except HandshakeError as e:
        check(e.status == 404, "attach unknown: %d" % e.status)
    st, _, _ = ex.request("GET", "/pty/%s/ws" % sid)  # not a WebSocket handshake
    check(st == 400, "plain GET of ws: %d" % st)
    ex.json("DELETE", "/pty/" + sid)
    st, _, _ = ex.request("GET", "/pty/" + sid)
    check(st == 404, "deleted session still there")
    print("ok - create, get, delete, 404s, bad bodies, plain GET of /ws")


def test_shell(ex):
    sid = new_session(ex)
    t = Term(ex, sid, "?cols=90&rows=20")
    check(t.mode == "pty", "mode %r" % t.mode)
    t.stdin("stty size; tty; echo marker-$((6*7))\n")
    t.wait_out("20 90")
    t.wait_out("marker-42")
    check(b"/dev/pts/" in t.out, "not on a pty: %r" % t.out[-300:])
    t.send_json({"type": "resize", "cols": 123, "rows": 45})
    t.send_json({"type": "stdin", "data": "stty size\n"})
    t.wait_out("45 123")
    # job control: the shell runs sleep in the foreground; SIGINT reaches it, not the shell
    t.stdin("echo go1; sleep 100\n")
    t.wait_out("go1\r\n")
    time.sleep(0.3)
    start = time.time()
    t.send_json({"type": "signal", "signal": "SIGINT"})
    t.stdin("echo rc=$?\n")  # (bash drops the rest of a line whose job died of SIGINT)
    t.wait_out("rc=130", timeout=5)
    check(time.time() - start < 3, "SIGINT took %.1f s" % (time.time() - start))
    # Ctrl-C typed as a byte goes through the line discipline the same way
    t.stdin("echo go2; sleep 100\n")
    t.wait_out("go2\r\n")
    time.sleep(0.3)
    t.stdin(b"\x03")
    t.stdin("echo rc2=$?\n")
    t.wait_out("rc2=130", timeout=5)
    t.send_json({"type": "ping"})
    t.wait_msg("pong")
    info = ex.json("GET", "/pty/" + sid)
    check(info["running"] is True and info["output_offset"] > 0, "info %r" % info)
    t.stdin("exit 3\n")
    check(t.wait_msg("exit")["exit_code"] == 3, "exit frame %r" % t.msgs)
    check(t.wait_close() == 1000, "close code %r" % t.close_code)
    info = ex.json("GET", "/pty/" + sid)
    check(info["running"] is False and info.get("exit_code") == 3, "after exit %r" % info)
    # replay after the exit: everything from offset 0, then the exit frame again
    r = Term(ex, sid, "?since=0")
    r.wait_close()
    check(r.replay and r.replay[0][0] == 0, "replay frames %r" % r.replay[:2])
    check(b"marker-42" in r.out and r.out == t.out[:len(r.out)] and len(r.out) == len(t.out),
          "replay differs: %d vs %d bytes" % (len(r.out), len(t.out)))
    check(r.wait_msg("exit")["exit_code"] == 3, "exit on replay")
    # replay from the middle: offsets are byte offsets of the output
    mid = len(t.out) // 2
    r = Term(ex, sid, "?since=%d" % mid)
    r.wait_close()
    check(r.replay[0][0] == mid and r.out == t.out[mid:], "replay from %d: %r" % (mid, r.replay[:1]))
    ex.json("DELETE", "/pty/" + sid)
    print("ok - shell on a pty: stdin, stty size, resize, SIGINT to the foreground job, Ctrl-C, "
          "ping, exit code, replay from 0 and from the middle")


def test_command_and_pipe(ex):
    with tempfile.TemporaryDirectory() as d:
        sid = new_session(ex, {"cwd": d, "command": "pwd; echo out; echo err >&2; exit 4"})
        t = Term(ex, sid, "?pty=0")
        check(t.mode == "pipe", "mode %r" % t.mode)
        check(t.wait_msg("exit")["exit_code"] == 4, "exit %r" % t.msgs)
        t.wait_close()
        check(t.out == d.encode() + b"\nout\n" and t.err == b"err\n", "pipe output %r %r" % (
            t.out, t.err))
        # a command on a pty: stderr is the terminal too
        sid = new_session(ex, {"command": "echo a; echo b >&2; kill -TERM $$"})
        t = Term(ex, sid)
        check(t.wait_msg("exit")["exit_code"] == 128 + 15, "killed: %r" % t.msgs)
        check(b"a\r\nb\r\n" in t.out, "pty output %r" % t.out)
        # the working directory vanished before the start: START_FAILED
        gone = tempfile.mkdtemp()
        sid = new_session(ex, {"cwd": gone})
        os.rmdir(gone)
        t = Term(ex, sid)
        e = t.wait_msg("error")
        check(e["code"] == "START_FAILED", "error %r" % e)
        t.wait_close()
    print("ok - command + cwd, pipe mode (stdout/stderr channels), exit by signal, START_FAILED")


def test_eof(ex):
    """sbx: {"type":"eof"} closes a pipe-mode stdin; a fast command's output is whole even when
    the client's message crosses execd's close (a lingering close, not a reset)."""
    sid = new_session(ex, {"command": "wc -c"})
    t = Term(ex, sid, "?pty=0")
    for _ in range(4):
        t.stdin(b"x" * 25000)  # messages are at most 64 KiB
    t.send_json({"type": "eof"})
    check(t.wait_msg("exit")["exit_code"] == 0, "exit %r" % t.msgs)
    t.wait_close()
    check(t.out.strip() == b"100000", "wc -c saw %r" % t.out)
    for _ in range(20):
        sid = new_session(ex, {"command": "head -c 600000 /dev/zero"})
        t = Term(ex, sid, "?pty=0")
        t.send_json({"type": "eof"})
        t.wait_msg("exit")
        t.wait_close()
        check(len(t.out) == 600000, "output cut at %d bytes" % len(t.out))
    sid = new_session(ex, {"command": "cat"})
    t = Term(ex, sid)
    t.send_json({"type": "eof"})
    e = t.wait_msg("error")
    check(e["code"] == "INVALID_FRAME" and "pipe mode" in e["error"], "eof on a pty: %r" % e)
    t.send_json({"type": "signal", "signal": "KILL"})
    t.wait_close()
    print("ok - eof closes a pipe-mode stdin, refused on a pty; fast output whole (lingering close)")


def test_clients(ex):
    sid = new_session(ex)
    a = Term(ex, sid)
    try:
        Term(ex, sid)
        raise harness.Fail("a second client was let in")
    except HandshakeError as e:
        check(e.status == 409, "second client: %d" % e.status)
    v = Term(ex, sid, "?viewer=1")
    a.stdin("echo both-see-this\n")
    a.wait_out("both-see-this\r\n")
    v.wait_out("both-see-this\r\n")
    for bad in ({"type": "stdin", "data": "x"}, {"type": "resize", "cols": 10, "rows": 10},
                {"type": "signal", "signal": "SIGINT"}):
        v.msgs.clear()
        v.send_json(bad)
        check(v.wait_msg("error")["code"] == "INVALID_FRAME", "viewer %r" % bad)
    v.msgs.clear()
    v.stdin("echo from-viewer\n")
    v.wait_msg("error")
    # takeover: the holder gets TAKEN_OVER and close 4001, the new one drives the shell
    b = Term(ex, sid, "?takeover=1&since=0")
    check(a.wait_msg("error")["code"] == "TAKEN_OVER", "taken over: %r" % a.msgs)
    check(a.wait_close() == 4001 and a.close_reason == b"TAKEN_OVER", "code %r" % a.close_code)
    b.wait_out("both-see-this\r\n")
    check(b.replay and b.replay[0][0] == 0, "takeover replay %r" % b.replay[:1])
    b.stdin("echo second-holder\n")
    b.wait_out("second-holder\r\n")
    v.wait_out("second-holder\r\n")
    check(b"from-viewer" not in b.out, "viewer input reached the shell")
    # a viewer that vanishes, a holder that vanishes: the session goes on
    v.ws.sock.close()
    b.ws.sock.close()
    time.sleep(0.2)
    c = Term(ex, sid)
    c.stdin("echo third\n")
    c.wait_out("third\r\n")
    # delete while attached: SESSION_GONE
    ex.json("DELETE", "/pty/" + sid)
    check(c.wait_msg("error")["code"] == "SESSION_GONE", "delete: %r" % c.msgs)
    c.wait_close()
    print("ok - one client (409), viewers read-only alongside, takeover (4001), "
          "vanished clients, delete while attached")


def is_static(binary):
    """No ELF interpreter: the static execd (a sanitizer build's RSS says nothing: ASan keeps
    freed memory in its quarantine)."""
    with open(binary, "rb") as f:
        return b"/ld-linux" not in f.read(4096)


def test_flood(ex, binary):
    if ex.external:
        print("ok - flood # SKIP external execd (its RSS is not ours to read)")
        return
    base = rss_kib(ex.pid)
    sid = new_session(ex, {"command": "yes flood-line-of-some-length"})
    t = Term(ex, sid)
    dead = Term(ex, sid, "?viewer=1")  # never reads again
    peak = 0
    end = time.time() + 4
    while time.time() < end:  # a slow holder: a little at a time
        t.ws.sock.settimeout(5)
        for _ in range(4):
            t.pump_one()
        t.out = t.out[-1000:]
        time.sleep(0.05)
        peak = max(peak, rss_kib(ex.pid))
    off1 = ex.json("GET", "/pty/" + sid)["output_offset"]
    # now a fast holder: the dead viewer must not hold the process back
    t.ws.sock.settimeout(5)
    end = time.time() + 3
    got = 0
    while time.time() < end:
        op, p = t.ws.recv_frame()
        got += len(p)
        if op == 9:
            t.ws.send(p, opcode=10)
        peak = max(peak, rss_kib(ex.pid))
    off2 = ex.json("GET", "/pty/" + sid)["output_offset"]
    check(off2 - off1 > 20 << 20, "the flood stalled behind a dead viewer: %d bytes in 3 s" % (
        off2 - off1))
    growth = peak - base
    if is_static(binary):
        check(growth < 16 << 10, "execd RSS grew by %d KiB (base %d)" % (growth, base))
    ex.json("DELETE", "/pty/" + sid)
    dead.close()
    t.close()
    st, _, _ = ex.request("GET", "/ping")
    check(st == 200, "ping after flood")
    print("ok - flood: slow holder pushes back, a dead viewer holds nothing, %d MiB through, "
          "RSS growth %d KiB%s" % ((off2 >> 20), growth,
                                   "" if is_static(binary) else " (not checked: sanitizer build)"))


def raw_frame(op, payload, mask=True, fin=True, rsv=0, length=None):
    n = len(payload) if length is None else length
    head = bytes([(0x80 if fin else 0) | rsv | op])
    mb = 0x80 if mask else 0
    if n < 126:
        head += bytes([mb | n])
    elif n < 65536:
        head += bytes([mb | 126]) + struct.pack(">H", n)
    else:
        head += bytes([mb | 127]) + struct.pack(">Q", n)
    if mask:
        k = os.urandom(4)
        payload = bytes(b ^ k[i & 3] for i, b in enumerate(payload))
        head += k
    return head + payload


def test_bad_frames(ex):
    sid = new_session(ex)
    t = Term(ex, sid)
    soft = [b"not json", b"[1,2]", b'{"type":5}', b'{"type":"nope"}',
            b'{"type":"resize","cols":0,"rows":5}', b'{"type":"resize","cols":"a"}',
            b'{"type":"signal","signal":"SIGNOPE"}', b'{"type":"stdin","data":7}',
            b'\xff\xfe']
    for s in soft:
        t.msgs.clear()
        t.ws.sock.sendall(raw_frame(1, s))
        check(t.wait_msg("error")["code"] == "INVALID_FRAME", "text %r: %r" % (s, t.msgs))
    for b in (b"", b"\x05abc"):
        t.msgs.clear()
        t.ws.sock.sendall(raw_frame(2, b))
        check(t.wait_msg("error")["code"] == "INVALID_FRAME", "binary %r" % b)
    # fragmented stdin is reassembled
    t.ws.sock.sendall(raw_frame(2, b"\x00echo frag", fin=False) + raw_frame(0, b"mented\n"))
    t.wait_out("fragmented\r\n")
    t.send_json({"type": "ping"})
    t.wait_msg("pong")
    hard = [("unmasked", raw_frame(1, b'{"type":"ping"}', mask=False), 1002),
            ("reserved bits", raw_frame(1, b"{}", rsv=0x40), 1002),
            ("unknown opcode", raw_frame(3, b""), 1002),
            ("too big", raw_frame(2, b"", length=1 << 20)[:14], 1009),
            ("lone continuation", raw_frame(0, b"x"), 1002),
            ("long ping", raw_frame(9, b"x" * 200), 1002)]
    for what, data, code in hard:
        c = Term(ex, sid, "?viewer=1")
        c.ws.sock.sendall(data)
        got = c.wait_close()
        check(got == code, "%s: close %r, want %d" % (what, got, code))
        check(any(m.get("code") == "INVALID_FRAME" for m in c.msgs), "%s: no error frame" % what)
    # garbage after the handshake, then a client that closes mid-frame
    s = socket.create_connection((ex.host, ex.port))
    s.close()
    c = Term(ex, sid, "?viewer=1")
    c.ws.sock.sendall(raw_frame(2, b"\x00" * 100)[:20])
    c.ws.sock.close()
    t.stdin("echo still-alive\n")
    t.wait_out("still-alive\r\n")
    ex.json("DELETE", "/pty/" + sid)
    st, _, _ = ex.request("GET", "/ping")
    check(st == 200, "ping after bad frames")
    print("ok - bad frames: error frames for bad messages, close 1002/1009 for protocol "
          "violations, fragments reassembled, execd unharmed")


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else None
    home = tempfile.mkdtemp(prefix="pty-home-")  # no rc file of the machine's user
    env = dict(os.environ, HOME=home, PS1="$ ")
    ex = harness.Execd(binary, env=env)
    try:
        for t in (test_crud, test_shell, test_command_and_pipe, test_eof, test_clients):
            t(ex)
        test_flood(ex, binary or os.environ.get("EXECD_BIN", ""))
        test_bad_frames(ex)
    except Exception:
        if not ex.external:
            sys.stderr.write(ex.read_log()[-4000:])
        raise
    finally:
        rc = ex.stop()
    if rc != 0:
        raise harness.Fail("execd exited %d" % rc)


if __name__ == "__main__":
    main()
