#!/usr/bin/env python3
"""A FAKE Daytona for the hermetic tests of the `daytona` provider (the real one is a remote
cloud service that cannot run here). It speaks the subset of Daytona's REST API the provider
uses, with the same shapes:

  control plane  /api/sandbox (POST, GET ?labels=), /api/sandbox/{id} (GET, DELETE),
                 /api/sandbox/{id}/start|stop (POST), /api/sandbox/{id}/labels (PUT),
                 /api/sandbox/{id}/ports/{port}/preview-url (GET)
  toolbox        /toolbox/{id}/files/upload?path= (multipart), /toolbox/{id}/process/execute,
                 /toolbox/{id}/process/session, /toolbox/{id}/process/session/{s}/exec
  preview proxy  a second port: routes by the X-Daytona-Preview-Token header to the port of the
                 sandbox and splices bytes both ways (SSE and all)

A "sandbox" is a directory; its commands run as local processes in their own session (no
isolation: test code). To give each fake sandbox its own execd port and filesystem, commands
and upload paths are rewritten: the provider's remote_dir becomes <root>/<id>/remote, and
execd's port 44772 on 0.0.0.0 a free loopback port. Every API request must carry
`Authorization: Bearer <key>` (the key is read from --key-file); all requests are recorded.

Test control (no auth): GET /fake/requests, POST /fake/config {"create_states": [...]},
POST /fake/sandbox/{id}/states {"states": [...]} (served one per GET, the last one sticks;
"stopped"/"error"/... also kill the sandbox's processes), GET /fake/sandbox/{id}.

With --tls-cert/--tls-key both ports speak HTTPS (the provider's TLS paths: libcurl for the
API, the TLS pump behind the router for the preview proxy).

Usage: fake_daytona.py --key-file F --root DIR --remote-dir /tmp/.sbx-fake --ports-file F
                       [--tls-cert C --tls-key K]
"""
import argparse
import json
import os
import re
import select
import shutil
import signal
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
SANDBOXES = {}   # id -> dict
REQUESTS = []    # every API request
PREVIEWS = {}    # token -> (id, port)
CONFIG = {"create_states": ["creating"], "start_states": ["starting"],
          "stop_states": ["stopping"]}
ARGS = None
KEY = None
PREVIEW_PORT = None
API_PORT = None
SCHEME = "http"
TLS = None  # server-side ssl.SSLContext with --tls-cert
STOPPED_LIKE = {"stopped", "archived", "paused", "error", "build_failed", "destroyed",
                "destroying"}


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + ".%06dZ" % (time.time() % 1 * 1e6)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dto(sb):
    return {k: sb[k] for k in ("id", "state", "labels", "env", "createdAt", "toolboxProxyUrl",
                               "snapshot", "buildInfo", "cpu", "memory", "autoStopInterval",
                               "target") if k in sb}


def kill_procs(sb):
    for pgid in sb.get("pgids", []):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
    sb["pgids"] = []


def set_state(sb, state):
    sb["state"] = state
    if state in STOPPED_LIKE:
        kill_procs(sb)


def advance(sb):
    """One GET: serve the next queued state (the last one sticks)."""
    q = sb.get("queue")
    if q:
        set_state(sb, q.pop(0))
        if not q:
            sb.pop("queue")


def rewrite(sb, text):
    text = text.replace(ARGS.remote_dir, os.path.join(sb["root"], "remote"))
    if "SBX_EXECD_LISTEN=0.0.0.0:44772" in text:
        port = free_port()
        sb["ports"][44772] = port
        text = text.replace("SBX_EXECD_LISTEN=0.0.0.0:44772", "SBX_EXECD_LISTEN=127.0.0.1:%d" % port)
    return text


def sandbox_env(sb):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": sb["root"]}
    env.update(sb.get("env") or {})
    return env


def parse_multipart(ctype, body):
    m = re.search(r'boundary="?([^";]+)"?', ctype or "")
    if not m:
        return None
    for part in body.split(b"--" + m.group(1).encode()):
        head, sep, data = part.partition(b"\r\n\r\n")
        if sep and b'name="file"' in head:
            return data[:-2] if data.endswith(b"\r\n") else data
    return None


class Api(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, status, obj=None):
        body = b"" if obj is None else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def handle_any(self, method):
        raw = self.body()
        url = urllib.parse.urlsplit(self.path)
        path, query = url.path, urllib.parse.parse_qs(url.query)
        if path.startswith("/fake/"):
            return self.fake(method, path, raw)
        with LOCK:
            REQUESTS.append({"method": method, "path": path, "query": url.query,
                             "headers": dict(self.headers.items()),
                             "body": raw.decode("utf-8", "replace")[:100000]})
        if self.headers.get("Authorization") != "Bearer " + KEY:
            return self.reply(401, {"statusCode": 401, "message": "Unauthorized"})
        if path.startswith("/api/"):
            return self.api(method, path[4:], query, raw)
        if path.startswith("/toolbox/"):
            return self.toolbox(method, path[8:], query, raw)
        return self.reply(404, {"message": "no route"})

    do_GET = lambda self: self.handle_any("GET")  # noqa: E731
    do_POST = lambda self: self.handle_any("POST")  # noqa: E731
    do_PUT = lambda self: self.handle_any("PUT")  # noqa: E731
    do_DELETE = lambda self: self.handle_any("DELETE")  # noqa: E731

    # ---- test control ----
    def fake(self, method, path, raw):
        with LOCK:
            if path == "/fake/requests":
                return self.reply(200, REQUESTS)
            if path == "/fake/config" and method == "POST":
                CONFIG.update(json.loads(raw))
                return self.reply(200, CONFIG)
            m = re.fullmatch(r"/fake/sandbox/([^/]+)(/states)?", path)
            sb = SANDBOXES.get(m.group(1)) if m else None
            if not sb:
                return self.reply(404, {"message": "no such sandbox"})
            if m.group(2) and method == "POST":
                states = json.loads(raw)["states"]
                set_state(sb, states[0])
                if len(states) > 1:
                    sb["queue"] = states[1:]
                return self.reply(200, dto(sb))
            out = dto(sb)
            out["root"] = sb["root"]
            out["ports"] = sb["ports"]
            return self.reply(200, out)

    # ---- control plane ----
    def api(self, method, path, query, raw):
        with LOCK:
            if path == "/sandbox" and method == "POST":
                return self.create(json.loads(raw))
            if path == "/sandbox" and method == "GET":
                want = json.loads(query.get("labels", ["{}"])[0])
                items = [dto(sb) for sb in SANDBOXES.values()
                         if all(sb["labels"].get(k) == v for k, v in want.items())]
                return self.reply(200, items)
            m = re.fullmatch(r"/sandbox/([^/]+)(?:/(start|stop|labels|ports/(\d+)/preview-url))?",
                             path)
            sb = SANDBOXES.get(m.group(1)) if m else None
            if not sb:
                return self.reply(404, {"statusCode": 404, "message": "Sandbox not found"})
            what = m.group(2)
            if what is None and method == "GET":
                advance(sb)
                return self.reply(200, dto(sb))
            if what is None and method == "DELETE":
                kill_procs(sb)
                shutil.rmtree(sb["root"], ignore_errors=True)
                sb["state"] = "destroyed"
                sb.pop("queue", None)
                return self.reply(200)
            if what in ("start", "stop") and method == "POST":
                return self.start_stop(sb, what)
            if what == "labels" and method == "PUT":
                sb["labels"] = json.loads(raw)["labels"]
                return self.reply(200, {"labels": sb["labels"]})
            if what and what.startswith("ports/") and method == "GET":
                port = int(m.group(3))
                token = uuid.uuid4().hex
                PREVIEWS[token] = (sb["id"], port)
                return self.reply(200, {"sandboxId": sb["id"], "token": token,
                                        "url": "%s://127.0.0.1:%d" % (SCHEME, PREVIEW_PORT)})
            return self.reply(405, {"message": "method not allowed"})

    def create(self, req):
        sid = str(uuid.uuid4())
        root = os.path.join(ARGS.root, sid)
        os.makedirs(root)
        states = list(CONFIG["create_states"]) + ["started"]
        sb = {"id": sid, "state": states[0], "queue": states[1:], "labels": req.get("labels", {}),
              "env": req.get("env", {}), "createdAt": now(), "root": root, "ports": {},
              "pgids": [], "toolboxProxyUrl": "%s://127.0.0.1:%d/toolbox" % (SCHEME, API_PORT)}
        for k in ("snapshot", "buildInfo", "cpu", "memory", "autoStopInterval", "target"):
            if k in req:
                sb[k] = req[k]
        SANDBOXES[sid] = sb
        return self.reply(200, dto(sb))

    def start_stop(self, sb, what):
        if what == "start" and sb["state"] not in ("stopped", "archived", "paused", "started"):
            return self.reply(400, {"message": "sandbox is %s" % sb["state"]})
        if what == "stop" and sb["state"] != "started":
            return self.reply(400, {"message": "sandbox is %s" % sb["state"]})
        states = list(CONFIG["%s_states" % what]) + ["started" if what == "start" else "stopped"]
        kill_procs(sb)  # a restart of the container: nothing keeps running
        set_state(sb, states[0])
        sb["queue"] = states[1:]
        return self.reply(200)

    # ---- toolbox ----
    def toolbox(self, method, path, query, raw):
        m = re.fullmatch(r"/([^/]+)(/.*)", path)
        with LOCK:
            sb = SANDBOXES.get(m.group(1)) if m else None
        if not sb or sb["state"] != "started":
            return self.reply(400 if sb else 404, {"message": "sandbox is not started"})
        what = m.group(2)
        if what == "/files/upload" and method == "POST":
            data = parse_multipart(self.headers.get("Content-Type"), raw)
            dst = rewrite(sb, query["path"][0])
            if data is None or not dst.startswith(sb["root"]):
                return self.reply(400, {"message": "bad upload"})
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "wb") as f:
                f.write(data)
            return self.reply(200)
        req = json.loads(raw or b"{}")
        if what == "/process/execute":
            p = subprocess.run(["/bin/sh", "-c", rewrite(sb, req["command"])], cwd=sb["root"],
                               env=sandbox_env(sb), capture_output=True, timeout=60)
            return self.reply(200, {"exitCode": p.returncode,
                                    "result": (p.stdout + p.stderr).decode("utf-8", "replace")})
        if what == "/process/session":
            return self.reply(200)
        if re.fullmatch(r"/process/session/[^/]+/exec", what):
            cmd = rewrite(sb, req["command"])
            p = subprocess.Popen(["/bin/sh", "-c", cmd], cwd=sb["root"], env=sandbox_env(sb),
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
            with LOCK:
                sb["pgids"].append(p.pid)
            threading.Thread(target=p.wait, daemon=True).start()  # reap it
            return self.reply(200, {"cmdId": uuid.uuid4().hex})
        return self.reply(404, {"message": "no toolbox route " + what})


class Preview(socketserver.BaseRequestHandler):
    """Daytona's preview proxy: Host and token in, the sandbox's port out, bytes spliced."""

    def handle(self):
        c = self.request
        if TLS:
            try:
                c = TLS.wrap_socket(c, server_side=True)
            except (ssl.SSLError, OSError):
                return
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            chunk = c.recv(65536)
            if not chunk:
                return
            head += chunk
        lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        hdrs = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        token = hdrs.get("x-daytona-preview-token", "")
        with LOCK:
            target = PREVIEWS.get(token)
            REQUESTS.append({"method": "PREVIEW", "path": lines[0], "query": "",
                             "headers": hdrs, "body": ""})
            sb = SANDBOXES.get(target[0]) if target else None
            port = sb["ports"].get(target[1], target[1]) if sb else None
        if not sb or sb["state"] != "started":
            c.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                      if not sb else
                      b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        try:
            up = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            c.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        up.settimeout(None)
        up.sendall(head)
        splice(c, up)
        up.close()


def splice(a, b):
    """Copy bytes both ways in one thread (an SSL socket must not be read and written from two
    threads at once) until either side closes."""
    socks = [a, b]
    while True:
        ready = [s for s in socks if isinstance(s, ssl.SSLSocket) and s.pending()]
        if not ready:
            ready, _, _ = select.select(socks, [], [], 60)
            if not ready:
                return
        for s in ready:
            try:
                d = s.recv(65536)
            except ssl.SSLWantReadError:
                continue
            except OSError:
                return
            if not d:
                return
            (b if s is a else a).sendall(d)


class PreviewServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global ARGS, KEY, PREVIEW_PORT, API_PORT, SCHEME, TLS
    ap = argparse.ArgumentParser()
    ap.add_argument("--key-file", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--remote-dir", required=True)
    ap.add_argument("--ports-file", required=True)
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ARGS = ap.parse_args()
    KEY = open(ARGS.key_file).read().strip()
    api = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    api.daemon_threads = True
    if ARGS.tls_cert:
        SCHEME = "https"
        TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        TLS.load_cert_chain(ARGS.tls_cert, ARGS.tls_key)
        api.socket = TLS.wrap_socket(api.socket, server_side=True)
    prev = PreviewServer(("127.0.0.1", 0), Preview)
    API_PORT, PREVIEW_PORT = api.server_address[1], prev.server_address[1]
    threading.Thread(target=prev.serve_forever, daemon=True).start()

    def bye(*_):
        with LOCK:
            for sb in SANDBOXES.values():
                kill_procs(sb)
        os._exit(0)

    signal.signal(signal.SIGTERM, bye)
    tmp = ARGS.ports_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"api": API_PORT, "preview": PREVIEW_PORT}, f)
    os.rename(tmp, ARGS.ports_file)
    api.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
