"""OSWorld's in-VM API on port 5000 of a desktop sandbox (issue 12), through the server's
router: every route OSWorld's PythonController and SetupController call, with upstream's
request encodings (JSON, form, multipart) and answer shapes and status codes
(../shared/reference/osworld-desktopenv.md, section 1).

  argv[1] = the sbx binary (sbx-execd next to it)
"""
import http.client
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from harness import Skip, check, main, wait_for  # noqa: E402
from test_desktop import CONFIG, NEEDED, png_decode  # noqa: E402


class OSWorld:
    def __init__(self, s, sid):
        self.s, self.base = s, "/sandboxes/%s/proxy/5000" % sid

    def get(self, path):
        return self.s.request("GET", self.base + path)

    def post(self, path, body=None, form=None, multipart=None):
        if form is not None:
            raw = "&".join("%s=%s" % (k, v) for k, v in form.items()).encode()
            return self.s.request("POST", self.base + path, raw=raw, headers={
                "Content-Type": "application/x-www-form-urlencoded"})
        if multipart is not None:
            b = uuid.uuid4().hex
            parts = []
            for name, val in multipart.items():
                if isinstance(val, bytes):
                    parts.append(b"--%s\r\nContent-Disposition: form-data; name=\"%s\"; "
                                 b"filename=\"blob\"\r\nContent-Type: application/octet-stream"
                                 b"\r\n\r\n%s\r\n" % (b.encode(), name.encode(), val))
                else:
                    parts.append(b"--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n"
                                 b"%s\r\n" % (b.encode(), name.encode(), val.encode()))
            raw = b"".join(parts) + b"--%s--\r\n" % b.encode()
            return self.s.request("POST", self.base + path, raw=raw, headers={
                "Content-Type": "multipart/form-data; boundary=%s" % b})
        return self.s.request("POST", self.base + path, body if body is not None else {})


def test(new_server):
    for p in NEEDED + ["python3"]:
        if not any(os.access(os.path.join(d, p), os.X_OK)
                   for d in os.environ.get("PATH", "/usr/bin").split(":")):
            raise Skip("%s not installed (scripts/deps.sh)" % p)
    if os.geteuid() != 0:
        raise Skip("native sandboxes need root")
    s = new_server(config_text=CONFIG, tag="osw")
    s.start()
    r = s.create(extensions={"sbx.desktop": "1280x800", "sbx.publish": "5000"},
                 resourceLimits={"cpu": "2", "memory": "2Gi"})
    check(r.status in (200, 202), "create: %r" % r)
    sid = r.json()["id"]
    o = OSWorld(s, sid)
    wait_for(lambda: o.get("/platform").status == 200, "the OSWorld API on port 5000", 20)
    # OSWorld's PythonController takes an IP and a port: the published port, no headers
    ip, port = s.request("GET", "/v1/sandboxes/%s/endpoints/5000" % sid).json()[
        "published"].rsplit(":", 1)
    c = http.client.HTTPConnection(ip, int(port), timeout=30)
    c.request("GET", "/screenshot")
    r = c.getresponse()
    body = r.read()
    c.close()
    check(r.status == 200 and png_decode(body)[:2] == (1280, 800),
          "http://%s:%s/screenshot (PythonController's way): %r" % (ip, port, r.status))

    r = o.get("/platform")
    check(r.body == b"Linux" and r.header("Content-Type").startswith("text/plain"), "/platform")
    r = o.get("/screenshot")
    check(r.status == 200 and r.header("Content-Type") == "image/png" and
          png_decode(r.body)[:2] == (1280, 800), "/screenshot: a 1280x800 PNG")
    check(o.post("/screen_size").json() == {"width": 1280, "height": 800}, "/screen_size")
    # PythonController.execute_python_command: ["python", "-c", "import pyautogui; ..."]
    r = o.post("/execute", {"command": ["python", "-c", "import pyautogui; import time; "
                                         "pyautogui.FAILSAFE = False; pyautogui.moveTo(33, 44); "
                                         "print('moved')"], "shell": False})
    j = r.json()
    check(r.status == 200 and j == {"status": "success", "output": "moved\n", "error": "",
                                    "returncode": 0}, "/execute of pyautogui: %r" % j)
    check(o.get("/cursor_position").json() == [33, 44], "/cursor_position: [x, y]")
    j = o.post("/execute", {"command": "echo $HOME | tr a-z A-Z", "shell": True}).json()
    check(j["output"] == "/ROOT\n" and j["returncode"] == 0, "/execute with shell: %r" % j)
    j = o.post("/setup/execute", {"command": "ls ~/nonexistent", "shell": False}).json()
    check(j["status"] == "success" and j["returncode"] != 0 and j["error"],
          "/setup/execute: a failing command's status and stderr: %r" % j)
    r = o.post("/execute", {"shell": False})
    check(r.status == 400, "/execute without command: %r" % r)

    # files: upload (multipart), list, download (form)
    r = o.post("/setup/upload", multipart={"file_path": "/root/up/dir/data.bin",
                                           "file_data": b"\x00\x01payload\xff"})
    check(r.status == 200 and r.body == b"File Uploaded: 10 bytes", "/setup/upload: %r" % r)
    tree = o.post("/list_directory", {"path": "/root/up"}).json()["directory_tree"]
    check(tree == {"type": "directory", "name": "up", "children": [
        {"type": "directory", "name": "dir", "children": [{"type": "file", "name": "data.bin"}]}]},
        "/list_directory: %r" % tree)
    check(o.post("/list_directory", {"path": "/no/such"}).status == 400, "list of a missing dir")
    r = o.post("/file", form={"file_path": "~/up/dir/data.bin"})
    check(r.status == 200 and r.body == b"\x00\x01payload\xff", "/file: the bytes: %r" % r)
    check(o.post("/file", form={"file_path": "/no/such"}).status == 404, "/file: 404")

    # windows: launch, verify, size, activate, close
    r = o.post("/setup/launch", {"command": ["xterm", "-T", "osw-term", "-geometry", "50x10+0+0"],
                                 "shell": False})
    check(r.status == 200 and b"launched successfully" in r.body, "/setup/launch: %r" % r)
    j = o.post("/execute_with_verification", {"command": "true", "shell": True,
                                              "verification": {"window_exists": "osw-term"},
                                              "max_wait_time": 15, "check_interval": 0.2}).json()
    check(j.get("verification") == "passed", "/execute_with_verification: %r" % j)
    j = o.post("/window_size", form={"app_class_name": "XTerm"}).json()
    check(j["width"] > 100 and j["height"] > 50, "/window_size: %r" % j)
    check(o.post("/window_size", form={}).status == 400, "/window_size without the field")
    r = o.post("/setup/activate_window", {"window_name": "osw-term"})
    check(r.status == 200, "/setup/activate_window: %r" % r)
    r = o.post("/setup/close_window", {"window_name": "osw-term", "strict": True})
    check(r.status == 200, "/setup/close_window: %r" % r)
    wait_for(lambda: b"osw-term" not in s.request(
        "GET", "/sandboxes/%s/proxy/44772/desktop/windows" % sid).body, "the window closed", 10)

    # the accessibility tree, recording, code
    at = o.get("/accessibility").json()["AT"]
    check(at.startswith("<desktop-frame") or "desktop-frame" in at[:300], "/accessibility")
    check(o.post("/start_recording").json()["status"] == "success", "/start_recording")
    check(o.post("/start_recording").status == 400, "a second recording: 400")
    time.sleep(1.5)
    r = o.post("/end_recording")
    check(r.status == 200 and r.header("Content-Type") == "video/mp4" and
          r.body[4:8] == b"ftyp", "/end_recording: an MP4")
    check(o.post("/end_recording").status == 400, "/end_recording without one: 400")
    j = o.post("/run_python", {"code": "import sys; print(6 * 7); sys.exit(0)"}).json()
    check(j["status"] == "success" and j["output"] == "42\n" and j["return_code"] == 0,
          "/run_python: %r" % j)
    j = o.post("/run_bash_script", {"script": "echo out; echo err >&2; exit 4",
                                    "timeout": 10}).json()
    check(j == {"status": "error", "output": "out\nerr\n", "error": "", "returncode": 4},
          "/run_bash_script works (broken upstream): %r" % j)
    check(o.get("/terminal").json() == {"output": None, "status": "success"}, "/terminal")
    check(o.get("/no/such/route").status == 404, "unknown route: 404")
    print("ok   OSWorld's in-VM API on port 5000 through the router: every route, upstream's "
          "shapes", flush=True)


if __name__ == "__main__":
    main(test)
