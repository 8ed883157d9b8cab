"""OSWorld's in-VM HTTP API (desktop_env/server/main.py) on an sbx desktop, so OSWorld's own
PythonController and SetupController drive a sandbox unchanged. sbx-execd writes this file and
starts it on port 5000 of the sandbox while a desktop runs; screenshots, actions, windows and
the accessibility tree go through execd's desktop socket (SBX_DESKTOP_SOCKET), commands run
here. Standard library only. Shapes and status codes follow upstream (docs/desktop.md lists
them); where upstream is broken (/run_bash_script always 500s there) this one works.

Like upstream, there is no authentication here: the port is reached from outside only through
the sbx API (router, API key) or a host port published on purpose.
"""
import base64
import email.parser
import email.policy
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EXECUTE_TIMEOUT = 120
MAX_BODY = 1 << 30
_lock = threading.Lock()
_recording = {"proc": None, "path": "/tmp/recording.mp4"}


def desktop(req):
    """One request on execd's desktop socket (a fresh connection: requests come from threads)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(os.environ["SBX_DESKTOP_SOCKET"])
    with s, s.makefile("rwb") as f:
        f.write(json.dumps(req).encode() + b"\n")
        f.flush()
        ans = json.loads(f.readline() or b"{}")
    if "code" in ans and "message" in ans:
        raise RuntimeError(ans["message"])
    return ans


def fix_command(cmd):
    """OSWorld sends ["python", "-c", ...]: use this interpreter where `python` is missing."""
    if isinstance(cmd, list) and cmd and cmd[0] == "python" and not shutil.which("python"):
        return [sys.executable] + cmd[1:]
    return cmd


def expand(arg):
    return os.path.expanduser(arg) if isinstance(arg, str) and arg.startswith("~/") else arg


def prepare(command, shell):
    if isinstance(command, str) and not shell:
        command = shlex.split(command)
    if isinstance(command, list):
        command = fix_command([expand(a) for a in command])
    return command


def run(command, shell, timeout=EXECUTE_TIMEOUT, cwd=None):
    p = subprocess.run(prepare(command, shell), shell=shell, capture_output=True, text=True,
                       timeout=timeout, cwd=cwd, stdin=subprocess.DEVNULL)
    return {"status": "success", "output": p.stdout, "error": p.stderr,
            "returncode": p.returncode}


def windows():
    return desktop({"sbx": "windows"})["windows"]


def find_window(name, strict=False, by_class=False):
    for w in windows():
        hay = (w.get("class", "") + " " + w.get("instance", "")) if by_class else w.get("title", "")
        if (hay == name) if strict else (name.lower() in hay.lower()):
            return w
    return None


def dir_tree(path):
    node = {"type": "directory", "name": os.path.basename(path.rstrip("/")) or path,
            "children": []}
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError:
        return node
    for e in entries:
        if e.is_dir(follow_symlinks=False):
            node["children"].append(dir_tree(e.path))
        else:
            node["children"].append({"type": "file", "name": e.name})
    return node


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sbx-osworld/1"

    def log_message(self, fmt, *args):  # quiet: execd's log is for execd
        pass

    # ---- plumbing
    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            raise ValueError("body too large")
        return self.rfile.read(n) if n else b""

    def json_body(self):
        data = self.body()
        return json.loads(data) if data else {}

    def form(self):
        """application/x-www-form-urlencoded or multipart/form-data: {name: str|bytes}."""
        data = self.body()
        ctype = self.headers.get("Content-Type", "")
        if ctype.startswith("multipart/"):
            msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + data)
            out = {}
            for part in msg.iter_parts():
                name = part.get_param("name", header="content-disposition")
                payload = part.get_payload(decode=True) or b""
                out[name] = payload if part.get_filename() else payload.decode("utf-8", "replace")
            return out
        return {k: v[0] for k, v in urllib.parse.parse_qs(data.decode()).items()}

    def send(self, code, body, ctype="application/json", extra=None):
        if not isinstance(body, (bytes, bytearray)):
            body = (json.dumps(body) if ctype == "application/json" else str(body)).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def text(self, code, s):
        self.send(code, s, "text/plain; charset=utf-8")

    def route(self, method):
        path = urllib.parse.urlsplit(self.path).path
        fn = ROUTES.get((method, path))
        if fn is None:
            self.send(404, {"error": "not found: %s %s" % (method, path)})
            return
        try:
            fn(self)
        except subprocess.TimeoutExpired as e:
            self.send(500, {"status": "error", "message": "timed out after %s s" % e.timeout})
        except (ValueError, KeyError, TypeError, json.JSONDecodeError) as e:
            self.send(400, {"status": "error", "message": str(e)})
        except Exception as e:  # noqa: BLE001 - upstream answers 500 with the message too
            self.send(500, {"status": "error", "message": str(e)})

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")


# ---- routes (upstream's names and shapes)
def r_execute(h):
    j = h.json_body()
    h.send(200, run(j["command"], bool(j.get("shell", False))))


def r_execute_verify(h):
    j = h.json_body()
    res = run(j["command"], bool(j.get("shell", False)))
    ver = j.get("verification") or {}
    max_wait, interval = float(j.get("max_wait_time", 10)), float(j.get("check_interval", 1))
    t0 = time.time()
    while time.time() - t0 <= max_wait:
        ok = True
        if ver.get("window_exists"):
            ok = find_window(ver["window_exists"]) is not None
        if ok and ver.get("command_success"):
            ok = subprocess.run(ver["command_success"], shell=True,
                                capture_output=True).returncode == 0
        if ok:
            res.update(verification="passed", wait_time=round(time.time() - t0, 3))
            h.send(200, res)
            return
        time.sleep(interval)
    res.update(status="verification_failed", wait_time=round(time.time() - t0, 3))
    h.send(500, res)


def r_launch(h):
    j = h.json_body()
    command, shell = j["command"], bool(j.get("shell", False))
    subprocess.Popen(prepare(command, shell), shell=shell, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)
    h.text(200, "%s launched successfully" % (command if isinstance(command, str)
                                              else " ".join(command)))


def r_screenshot(h):
    png = base64.b64decode(desktop({"action": "screenshot"})["image"]["data"])
    h.send(200, png, "image/png")


def r_accessibility(h):
    h.send(200, {"AT": desktop({"sbx": "accessibility"})["xml"]})


ST = "{https://accessibility.ubuntu.example.org/ns/state}"


def terminal_text(xml):
    """Upstream's query, on the same tree: the focused terminal of gnome-terminal's active
    window (`//application[@name="gnome-terminal-server"]/frame[@st:active="true"]
    //terminal[@st:focused="true"]`), its text without trailing blanks; None unless one."""
    import xml.etree.ElementTree as ET
    found = []
    for app in ET.fromstring(xml).iter("application"):
        if app.get("name") != "gnome-terminal-server":
            continue
        for frame in app.findall("frame"):
            if frame.get(ST + "active") != "true":
                continue
            found += [t for t in frame.iter("terminal") if t.get(ST + "focused") == "true"]
    return (found[0].text or "").rstrip() if len(found) == 1 else None


def r_terminal(h):
    try:
        out = terminal_text(desktop({"sbx": "accessibility"})["xml"])
    except Exception as e:  # upstream answers 500 with the message
        h.send(500, {"status": "error", "message": str(e)})
        return
    h.send(200, {"output": out, "status": "success"})


def r_screen_size(h):
    h.body()
    a = desktop({"sbx": "screen"})
    h.send(200, {"width": a["width"], "height": a["height"]})


def r_window_size(h):
    f = h.form()
    if "app_class_name" not in f:
        h.send(400, {"error": "app_class_name is required"})
        return
    w = find_window(f["app_class_name"], by_class=True)
    if not w:
        h.send(404, {"error": "no window of class %s" % f["app_class_name"]})
        return
    h.send(200, {"width": w["width"], "height": w["height"]})


def r_desktop_path(h):
    h.body()
    p = os.path.expanduser("~/Desktop")
    if os.path.isdir(p):
        h.send(200, {"desktop_path": p})
    else:
        h.send(404, {"error": "no desktop directory"})


def r_wallpaper(h):
    h.body()
    h.send(404, {"error": "no wallpaper is set on this desktop"})


def r_list_directory(h):
    p = h.json_body().get("path")
    if not p or not os.path.isdir(os.path.expanduser(p)):
        h.send(400, {"error": "path is missing or not a directory"})
        return
    h.send(200, {"directory_tree": dir_tree(os.path.expanduser(p))})


def r_file(h):
    p = h.form().get("file_path")
    if not p:
        h.send(400, {"error": "file_path is required"})
        return
    p = os.path.expandvars(os.path.expanduser(p))
    if not os.path.isfile(p):
        h.send(404, {"error": "File not found"})
        return
    with open(p, "rb") as f:
        data = f.read()
    h.send(200, data, "application/octet-stream",
           {"Content-Disposition": 'attachment; filename="%s"' % os.path.basename(p)})


def r_upload(h):
    f = h.form()
    path, data = f.get("file_path"), f.get("file_data")
    if not path or data is None:
        h.send(400, {"error": "file_path and file_data are required"})
        return
    path = os.path.expanduser(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as out:
        out.write(data if isinstance(data, bytes) else data.encode())
    h.text(200, "File Uploaded: %d bytes" % len(data))


def r_platform(h):
    h.text(200, "Linux")


def r_cursor_position(h):
    c = desktop({"action": "cursor_position"})["cursor"]
    h.send(200, [c["x"], c["y"]])


def r_change_wallpaper(h):
    p = h.json_body().get("path")
    if not p:
        h.send(400, {"error": "path is required"})
        return
    h.text(200, "Wallpaper not changed: this desktop has no wallpaper setting")


def r_download_file(h):
    j = h.json_body()
    url, path = j["url"], os.path.expanduser(j["path"])
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    last = None
    for _ in range(3):
        try:
            import urllib.request  # only here: it costs ~7 ms of the server's start
            with urllib.request.urlopen(url, timeout=300) as r, open(path, "wb") as out:
                shutil.copyfileobj(r, out)
            h.text(200, "File downloaded successfully")
            return
        except OSError as e:
            last = e
    h.send(500, {"status": "error", "message": "download failed: %s" % last})


def r_open_file(h):
    j = h.json_body()
    p = os.path.expanduser(j["path"])
    if os.path.exists(p):
        opener = shutil.which("xdg-open")
        if not opener:
            h.send(500, {"status": "error", "message": "xdg-open is not installed"})
            return
        subprocess.Popen([opener, p], start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        name = os.path.basename(p)
    elif shutil.which(p):
        subprocess.Popen([p], start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        name = p
    else:
        h.send(404, {"status": "error", "message": "File not found: %s" % p})
        return
    stem = os.path.splitext(name)[0]
    deadline = time.time() + float(j.get("timeout", 1800))
    while time.time() < deadline:
        w = find_window(name) or find_window(stem)
        if w:
            desktop({"sbx": "activate", "id": w["id"]})
            h.text(200, "%s opened successfully" % p)
            return
        time.sleep(0.2)
    h.send(500, {"status": "error", "message": "no window for %s" % name})


def window_op(h, op):
    j = h.json_body()
    w = find_window(j["window_name"], bool(j.get("strict")), bool(j.get("by_class")))
    if not w:
        h.send(404, {"status": "error", "message": "no window %s" % j["window_name"]})
        return
    desktop({"sbx": op, "id": w["id"]})
    h.text(200, "Window %s %s" % (j["window_name"], "activated" if op == "activate"
                                  else "closed"))


def r_activate_window(h):
    window_op(h, "activate")


def r_close_window(h):
    window_op(h, "close")


def r_start_recording(h):
    h.body()
    with _lock:
        if _recording["proc"] and _recording["proc"].poll() is None:
            h.send(400, {"status": "error", "message": "Recording is already in progress."})
            return
        a = desktop({"sbx": "screen"})
        path = _recording["path"]
        proc = subprocess.Popen(
            ["ffmpeg", "-y", "-nostdin", "-loglevel", "error", "-f", "x11grab", "-draw_mouse",
             "1", "-s", "%dx%d" % (a["width"], a["height"]), "-i",
             os.environ.get("DISPLAY", ":0"), "-c:v", "libx264", "-preset", "ultrafast",
             "-pix_fmt", "yuv420p", "-r", "30", path],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)
        if proc.poll() is not None:
            h.send(500, {"status": "error", "message": "ffmpeg failed: %s"
                         % proc.stderr.read().decode(errors="replace")[:500]})
            return
        _recording["proc"] = proc
    h.send(200, {"status": "success", "message": "Started recording."})


def r_end_recording(h):
    h.body()
    with _lock:
        proc = _recording["proc"]
        if not proc or proc.poll() is not None:
            h.send(400, {"status": "error", "message": "No recording in progress to stop."})
            return
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        _recording["proc"] = None
        with open(_recording["path"], "rb") as f:
            data = f.read()
    h.send(200, data, "video/mp4",
           {"Content-Disposition": 'attachment; filename="recording.mp4"'})


def r_run_python(h):
    code = h.json_body()["code"]
    path = os.path.join(tempfile.gettempdir(), "python_exec_%s.py" % uuid.uuid4().hex)
    with open(path, "w") as f:
        f.write(code)
    try:
        p = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL)
    finally:
        os.unlink(path)
    ok = p.returncode == 0
    h.send(200, {"status": "success" if ok else "error", "message": p.stdout + p.stderr,
                 "need_more": False, "output": p.stdout, "error": p.stderr,
                 "return_code": p.returncode})


def r_run_bash_script(h):
    j = h.json_body()
    script = j["script"]
    if not script.startswith("#!"):
        script = "#!/bin/bash\n" + script
    fd, path = tempfile.mkstemp(suffix=".sh")
    with os.fdopen(fd, "w") as f:
        f.write(script)
    os.chmod(path, 0o700)
    try:
        p = subprocess.run([path], capture_output=False, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True,
                           timeout=float(j.get("timeout", 100)), cwd=j.get("working_dir"),
                           stdin=subprocess.DEVNULL)
        h.send(200, {"status": "success" if p.returncode == 0 else "error",
                     "output": p.stdout, "error": "", "returncode": p.returncode})
    finally:
        os.unlink(path)


ROUTES = {
    ("POST", "/execute"): r_execute,
    ("POST", "/setup/execute"): r_execute,
    ("POST", "/execute_with_verification"): r_execute_verify,
    ("POST", "/setup/execute_with_verification"): r_execute_verify,
    ("POST", "/setup/launch"): r_launch,
    ("GET", "/screenshot"): r_screenshot,
    ("GET", "/terminal"): r_terminal,
    ("GET", "/accessibility"): r_accessibility,
    ("POST", "/screen_size"): r_screen_size,
    ("POST", "/window_size"): r_window_size,
    ("POST", "/desktop_path"): r_desktop_path,
    ("POST", "/wallpaper"): r_wallpaper,
    ("POST", "/list_directory"): r_list_directory,
    ("POST", "/file"): r_file,
    ("POST", "/setup/upload"): r_upload,
    ("GET", "/platform"): r_platform,
    ("GET", "/cursor_position"): r_cursor_position,
    ("POST", "/setup/change_wallpaper"): r_change_wallpaper,
    ("POST", "/setup/download_file"): r_download_file,
    ("POST", "/setup/open_file"): r_open_file,
    ("POST", "/setup/activate_window"): r_activate_window,
    ("POST", "/setup/close_window"): r_close_window,
    ("POST", "/start_recording"): r_start_recording,
    ("POST", "/end_recording"): r_end_recording,
    ("POST", "/run_python"): r_run_python,
    ("POST", "/run_bash_script"): r_run_bash_script,
}


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    host = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
    ThreadingHTTPServer.daemon_threads = True
    srv = ThreadingHTTPServer((host, port), Handler)
    srv.serve_forever()


if __name__ == "__main__":
    main()
