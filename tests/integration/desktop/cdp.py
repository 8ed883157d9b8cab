"""Headless Chromium driven over the DevTools protocol, standard library only: a small RFC 6455
client (tests must not need pip packages) and the few CDP calls the tests use.

    with Browser() as b:
        page = b.open("http://127.0.0.1:8080/...")
        page.wait_for("document.body.dataset.state === 'connected'")
        png = page.screenshot()
"""
import base64
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request


class WebSocket:
    """A client WebSocket over a plain TCP socket (ws:// only), text and binary messages."""

    def __init__(self, url, timeout=30, protocols=None, headers=None):
        m = re.match(r"ws://([^/:]+):(\d+)(/.*)?$", url)
        if not m:
            raise ValueError("not a ws:// URL: %s" % url)
        host, port, path = m.group(1), int(m.group(2)), m.group(3) or "/"
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = ["GET %s HTTP/1.1" % path, "Host: %s:%d" % (host, port), "Upgrade: websocket",
                 "Connection: Upgrade", "Sec-WebSocket-Key: " + key, "Sec-WebSocket-Version: 13"]
        if protocols:
            lines.append("Sec-WebSocket-Protocol: " + ", ".join(protocols))
        for k, v in (headers or {}).items():
            lines.append("%s: %s" % (k, v))
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed during the handshake: %r" % self.buf)
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        self.head = head.decode("latin-1")
        self.status = int(self.head.split(" ", 2)[1])
        if self.status != 101:
            body = self.buf
            raise HandshakeError(self.status, self.head, body)
        self.protocol = None
        for line in self.head.split("\r\n")[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == "sec-websocket-protocol":
                self.protocol = v.strip()

    def send(self, data, opcode=None, mask=True):
        if isinstance(data, str):
            data, op = data.encode(), 1
        else:
            op = 2
        op = opcode if opcode is not None else op
        n = len(data)
        head = bytes([0x80 | op])
        mbit = 0x80 if mask else 0
        if n < 126:
            head += bytes([mbit | n])
        elif n < 65536:
            head += bytes([mbit | 126]) + struct.pack(">H", n)
        else:
            head += bytes([mbit | 127]) + struct.pack(">Q", n)
        if mask:
            k = os.urandom(4)
            data = bytes(b ^ k[i & 3] for i, b in enumerate(data))
            head += k
        self.sock.sendall(head + data)

    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk

    def recv_frame(self):
        """(opcode, payload) of the next frame."""
        self._need(2)
        op, n = self.buf[0] & 0x0F, self.buf[1] & 0x7F
        pos = 2
        if n == 126:
            self._need(4)
            n, pos = struct.unpack(">H", self.buf[2:4])[0], 4
        elif n == 127:
            self._need(10)
            n, pos = struct.unpack(">Q", self.buf[2:10])[0], 10
        self._need(pos + n)
        payload, self.buf = self.buf[pos:pos + n], self.buf[pos + n:]
        return op, payload

    def recv(self):
        """The next data message (text as str, binary as bytes); pings answered."""
        while True:
            op, payload = self.recv_frame()
            if op == 9:
                self.send(payload, opcode=10)
            elif op == 8:
                raise ConnectionError("closed by the peer: %r" % payload)
            elif op in (1, 2):
                return payload.decode() if op == 1 else payload

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class HandshakeError(Exception):
    def __init__(self, status, head, body):
        super().__init__("WebSocket handshake answered %d: %s" % (status, body[:300]))
        self.status, self.head, self.body = status, head, body


class Page:
    def __init__(self, ws):
        self.ws, self.next_id = ws, 0
        self.events = []  # console messages, exceptions, log entries, failed loads

    def problems(self):
        """What the page reported: exceptions, console errors, log entries, failed loads."""
        out = []
        for m in self.events:
            p = m.get("params", {})
            if m["method"] == "Runtime.exceptionThrown":
                out.append("exception: %s" % p.get("exceptionDetails", {}).get(
                    "exception", {}).get("description", p))
            elif m["method"] == "Runtime.consoleAPICalled":
                out.append("console.%s: %s" % (p.get("type"), " ".join(
                    str(a.get("value", a.get("description", ""))) for a in p.get("args", []))))
            elif m["method"] == "Log.entryAdded":
                e = p.get("entry", {})
                out.append("log %s: %s %s" % (e.get("level"), e.get("text"), e.get("url", "")))
            elif m["method"] == "Network.loadingFailed":
                out.append("load failed: %s %s" % (p.get("errorText"), p.get("requestId")))
            elif m["method"] == "Page.javascriptDialogOpening":
                out.append("dialog %s: %s" % (p.get("type"), p.get("message")))
        return out

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("method") in ("Runtime.exceptionThrown", "Runtime.consoleAPICalled",
                                     "Log.entryAdded", "Network.loadingFailed",
                                     "Page.javascriptDialogOpening"):
                self.events.append(msg)
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError("%s: %s" % (expr, r["exceptionDetails"]))
        return r["result"].get("value")

    def wait_for(self, expr, timeout=20):
        """Until expr is true (an exception, as while the page loads, counts as false)."""
        end, last = time.time() + timeout, None
        while time.time() < end:
            try:
                if self.eval(expr):
                    return
            except RuntimeError as e:
                last = e
            time.sleep(0.1)
        raise TimeoutError("timed out waiting for %s (last error: %s)" % (expr, last))

    def dialogs(self):
        """The JavaScript dialogs (alert, confirm, prompt) the page opened."""
        return [m["params"] for m in self.events if m["method"] == "Page.javascriptDialogOpening"]

    def screenshot(self):
        return base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])


class Browser:
    """Debian's chromium, headless, on a private profile; killed (its process group) on exit."""

    def __init__(self, width=1280, height=900):
        self.size = (width, height)

    def __enter__(self):
        exe = shutil.which("chromium")
        if not exe:
            raise FileNotFoundError("chromium is not installed")
        self.profile = tempfile.mkdtemp(prefix="sbx-cdp-")
        args = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--remote-debugging-port=0", "--user-data-dir=" + self.profile,
                "--window-size=%d,%d" % self.size, "about:blank"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True)
        end = time.time() + 30
        self.port = None
        while time.time() < end and self.port is None:
            line = self.proc.stderr.readline().decode(errors="replace")
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if m:
                self.port = int(m.group(1))
            elif not line and self.proc.poll() is not None:
                break
        if self.port is None:
            self.__exit__(None, None, None)
            raise RuntimeError("chromium did not start its DevTools server")
        return self

    def open(self, url):
        """A new tab on url (navigated over CDP: a URL's #fragment survives)."""
        req = urllib.request.Request("http://127.0.0.1:%d/json/new?about:blank" % self.port,
                                     method="PUT")
        target = json.loads(urllib.request.urlopen(req, timeout=10).read())
        page = Page(WebSocket(target["webSocketDebuggerUrl"]))
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.call(domain + ".enable")
        page.call("Page.navigate", url=url)
        return page

    def __exit__(self, *exc):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
