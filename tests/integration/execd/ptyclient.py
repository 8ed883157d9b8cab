"""A client of one execd PTY session over WebSocket (COMPAT 2.6) for the tests: output by
channel, replay frames with their offsets, control messages, the close code. Used by
execd/pty and server/pty (through the router). Needs cdp.py (tests/integration/desktop) and a
`harness` module with check and Fail on sys.path.
"""
import json
import struct
import time

from cdp import WebSocket
from harness import Fail, check


class Term:
    """A client of one PTY session: output collected, control messages kept, close noted."""

    def __init__(self, ex, sid, query="", timeout=20, path=None):
        url = "ws://%s:%d%s/ws%s" % (ex.host, ex.port, path or "/pty/" + sid, query)
        self.ws = WebSocket(url, timeout=timeout, headers=ex.headers())
        self.out = b""
        self.err = b""
        self.replay = []  # (offset, bytes)
        self.msgs = []
        self.close_code = None
        self.close_reason = b""
        first = json.loads(self.ws.recv())
        check(first.get("type") == "connected" and first.get("session_id") == sid,
              "first frame: %r" % first)
        self.mode = first["mode"]

    def send_json(self, obj):
        self.ws.send(json.dumps(obj))

    def stdin(self, data):
        self.ws.send(b"\x00" + (data.encode() if isinstance(data, str) else data))

    def pump_one(self):
        op, p = self.ws.recv_frame()
        if op == 9:
            self.ws.send(p, opcode=10)
        elif op == 8:
            self.close_code = struct.unpack(">H", p[:2])[0] if len(p) >= 2 else 1005
            self.close_reason = p[2:]
        elif op == 1:
            self.msgs.append(json.loads(p))
        elif op == 2:
            ch = p[0]
            if ch == 1:
                self.out += p[1:]
            elif ch == 2:
                self.err += p[1:]
            elif ch == 3:
                off = struct.unpack(">Q", p[1:9])[0]
                self.replay.append((off, p[9:]))
                self.out += p[9:]
            else:
                raise Fail("unknown channel %d" % ch)

    def until(self, pred, what, timeout=15):
        end = time.time() + timeout
        while not pred():
            if self.close_code is not None:
                raise Fail("closed (%s %r) waiting for %s; output %r; msgs %r" % (
                    self.close_code, self.close_reason, what, self.out[-400:], self.msgs))
            if time.time() > end:
                raise Fail("timed out waiting for %s; output %r; msgs %r" % (
                    what, self.out[-400:], self.msgs))
            self.ws.sock.settimeout(max(0.1, end - time.time()))
            self.pump_one()

    def wait_out(self, needle, timeout=15):
        n = needle.encode() if isinstance(needle, str) else needle
        self.until(lambda: n in self.out, "output %r" % needle, timeout)

    def wait_msg(self, typ, timeout=15):
        def found():
            return any(m.get("type") == typ for m in self.msgs)
        self.until(found, "a %s message" % typ, timeout)
        return [m for m in self.msgs if m.get("type") == typ][-1]

    def wait_close(self, timeout=15):
        end = time.time() + timeout
        while self.close_code is None:
            check(time.time() < end, "no close frame; msgs %r" % self.msgs)
            self.ws.sock.settimeout(max(0.1, end - time.time()))
            self.pump_one()
        return self.close_code

    def close(self):
        self.ws.close()
