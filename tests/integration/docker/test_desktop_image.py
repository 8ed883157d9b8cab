#!/usr/bin/env python3
"""The desktop image (images/desktop/build.sh, Debian packages only) on both providers that run
OCI images: imported with `sbx image import` for native sandboxes, loaded into a private engine
(dockerd or podman, started and stopped by PID) for docker sandboxes. In each: a desktop at
create, a screenshot of the right size with an xterm's window in it, an action, OSWorld's
port-5000 API (python3 is in the image), and the live view's WebSocket greeting through
sbx serve. The image is built once per build dir and reused while its scripts are unchanged.

  test_desktop_image.py SBX IMAGE_TAR [--build-only]

(--build-only: CTest's docker/desktop-image-build, which runs alone: the build's disk and CPU
load made tests running beside it time out.)
"""
import hashlib
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
sys.path.insert(0, os.path.join(HERE, "..", "desktop"))
sys.path.insert(0, HERE)

import engine as eng  # noqa: E402
from cdp import WebSocket  # noqa: E402
from harness import Fail, Skip, check, main, wait_for  # noqa: E402
from test_desktop import Desk, png_decode  # noqa: E402

TAG = "sbx-desktop:test"
SCRIPTS = [os.path.join(ROOT, "images", "desktop", f) for f in ("build.sh", "mkimage.py")]


def image(path, tag=TAG, args=(), scripts=SCRIPTS):
    """The image tar at path, built unless the one there came from these scripts and args."""
    h = hashlib.sha256(repr(list(args)).encode())
    for f in scripts:
        with open(f, "rb") as fh:
            h.update(fh.read())
    stamp = path + ".sha256"
    if os.path.exists(path) and os.path.exists(stamp) and open(stamp).read() == h.hexdigest():
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    r = subprocess.run([SCRIPTS[0], "-o", path, "-t", tag] + list(args), capture_output=True,
                       text=True, timeout=1200)
    if r.returncode != 0:
        if "Could not resolve" in r.stderr or "Failed to fetch" in r.stderr:
            raise Skip("the package mirror is not reachable: %s" % r.stderr[-300:])
        raise Fail("images/desktop/build.sh: %s" % r.stderr[-2000:])
    with open(stamp, "w") as f:
        f.write(h.hexdigest())
    print("built the image %s: %d MB" % (tag, os.path.getsize(path) >> 20), flush=True)
    return path


def exercise(s, sid, what):
    """The desktop of sandbox sid works: status, shot, a window, an action, OSWorld, VNC."""
    d = Desk(s, sid)
    st = wait_for(lambda: (lambda j: j if j.get("state") == "running" else None)(
        d.req("GET", "/desktop").json()), "the desktop (%s)" % what, 30)
    check(st["width"] == 1024 and st["height"] == 768, "%s: 1024x768: %r" % (what, st))
    w = None
    for attempt in range(2):
        d.bg("xterm -title from-image -geometry 40x10+50+50 2>/tmp/xterm.log")
        try:
            w = d.window("from-image", 30)
            break
        except Fail:
            # Seen twice in CI, never here: the xterm runs (its shell too) but no window is
            # managed. Where each process waits, for the next look; then one more xterm.
            print("%s, attempt %d: no xterm window: %r\n%s" % (what, attempt + 1, d.windows(),
                  "\n".join(d.sh("ps -eo pid,stat,etime,wchan:24,args; cat /tmp/xterm.log; "
                                  "pkill xterm; true"))), flush=True)
    check(w is not None, "%s: an xterm's window appears" % what)
    check(w["width"] > 100, "%s: the xterm's window: %r" % (what, w))
    img = png_decode(d.shot().body)
    check(img[:2] == (1024, 768), "%s: a 1024x768 screenshot" % what)
    d.act({"action_type": "MOVE_TO", "parameters": {"x": 500, "y": 400}})
    check(d.ok("GET", "/desktop/cursor").json() == {"x": 500, "y": 400},
          "%s: the pointer moved" % what)
    o = wait_for(lambda: (lambda r: r if r.status == 200 else None)(
        s.request("GET", "/sandboxes/%s/proxy/5000/platform" % sid)),
        "OSWorld's API (%s)" % what, 30)
    check(o.body == b"Linux", "%s: OSWorld's /platform" % what)
    tok = s.request("POST", "/v1/sandboxes/%s/desktop/view" % sid, {}).json()["token"]
    ws = WebSocket("ws://127.0.0.1:%d/v1/sandboxes/%s/desktop/vnc" % (s.port, sid),
                   protocols=["binary", "sbx-token." + tok])
    check(ws.recv() == b"RFB 003.008\n", "%s: the live view's VNC greeting" % what)
    ws.close()
    print("ok   %s: desktop, screenshot, window, action, OSWorld API, live view" % what,
          flush=True)


def create(s, uri, **kw):
    body = {"image": {"uri": uri}, "entrypoint": ["sleep", "infinity"],
            "resourceLimits": {"cpu": "1", "memory": "1Gi"}, "timeout": 600,
            "extensions": {"sbx.desktop": "1024x768"}}
    body.update(kw)
    r = s.request("POST", "/v1/sandboxes", body, timeout=300)
    check(r.status == 202, "create from %s: %r" % (uri, r))
    return r.json()["id"]


def native(new_server, tar):
    s = new_server(config_text='providers = { supported = ["native"]; default = "native"; };\n',
                   tag="img-native")
    r = subprocess.run([s.sbx, "image", "import", "--state-dir", s.state, tar],
                       capture_output=True, text=True, timeout=600)
    check(r.returncode == 0, "sbx image import: %r" % r)
    s.start()
    sid = create(s, TAG)
    # the image's own programs, not the host's: its Debian userland in /etc/os-release
    out, _ = s.run(sid, "command -v Xvnc && grep -c bookworm /etc/os-release && id user")
    check(out[0] == "/usr/bin/Xvnc" and "uid=1000(user)" in out[-1],
          "the image's Xvnc and OSWorld's user: %r" % out)
    exercise(s, sid, "native, imported image")
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    check(s.stop() == 0, "clean stop")


def desktop_env(s, ref, kind):
    """OSWorld's loop on docker: the Python SDK's DesktopEnv with this image, a task solved in
    pyautogui (0 before, 1 after)."""
    sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))
    import sbx
    from sbx.desktop_env import DesktopEnv
    task = {"id": "docker-task", "instruction": "write ok",
            "config": [{"type": "launch", "parameters": {"command": [
                "xterm", "-T", "task-term", "-geometry", "60x10+0+0"]}},
                {"type": "execute_with_verification", "parameters": {
                    "command": "true", "shell": True,
                    "verification": {"window_exists": "task-term"}, "max_wait_time": 30,
                    "check_interval": 0.2}},
                {"type": "activate_window", "parameters": {"window_name": "task-term"}}],
            "evaluator": {"func": "exact_match",
                          "result": {"type": "vm_command_line", "command": "cat /tmp/out.txt",
                                     "shell": True},
                          "expected": {"type": "rule", "rules": {"expected": "ok\n"}}}}
    client = sbx.Client("127.0.0.1:%d" % s.port, s.key)
    with DesktopEnv(provider_name="docker", snapshot_name=ref, client=client,
                    screen_size=(1024, 768), memory="1Gi", cpu="1",
                    cache_dir=os.path.join(s.tmp, "cache")) as env:
        obs = env.reset(task_config=task)
        check(obs["screenshot"][:4] == b"\x89PNG", "an observation's screenshot")
        check(env.evaluate() == 0.0, "untouched: 0")
        env.step("pyautogui.typewrite('echo ok > /tmp/out.txt\\n')", pause=0.5)
        score = wait_for(lambda: env.evaluate() == 1.0 or None, "the task solved", 15)
        check(score, "solved: 1")
    left = [x for x in client.list() if x.metadata.get("sbx-desktop-env")]
    check(not left, "the environment's sandbox is gone: %r" % left)
    print("ok   DesktopEnv on docker (%s): reset, step, evaluate 0 -> 1" % kind, flush=True)


def load(e, tar):
    """POST /images/load with the tar, streamed."""
    c = eng.UnixHTTP(e.socket, timeout=600)
    try:
        c.putrequest("POST", "/v1.41/images/load?quiet=1")
        c.putheader("Content-Type", "application/x-tar")
        c.putheader("Content-Length", str(os.path.getsize(tar)))
        c.endheaders()
        with open(tar, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                c.send(chunk)
        r = c.getresponse()
        body = r.read()
        check(r.status == 200, "the engine loads the image: %d %r" % (r.status, body[:300]))
    finally:
        c.close()


def on_engine(new_server, tar, tag, body, what="img-docker"):
    """tar loaded into a private dockerd (or podman), a server with the docker provider on it
    started, body(server, image ref, engine kind) run; then the engine stopped, and nothing of
    it may be left on the host. Without an engine here: said, and skipped."""
    setup = eng.Setup("any")
    try:
        setup.start()
    except eng.EngineError as ex:
        left = setup.stop()
        if left:
            raise Fail("host changes left behind: %r" % left)
        print("docker part skipped: %s" % ex)
        return
    ok = False
    try:
        e = setup.engine
        load(e, tar)
        s = new_server(config_text=(
            'providers = { supported = ["docker"]; default = "docker";\n'
            '  docker = { socket = "%s"; network = "none"; cgroup_parent = "%s";\n'
            '             stop_timeout_s = 5; pull = "never"; }; };\n'
            % (e.socket, e.cgroup_parent)), tag=what)
        s.start()
        body(s, "localhost/" + tag if e.kind == "podman" else tag, e.kind)
        wait_for(lambda: not e.containers(), "the container to go", 30)
        check(s.stop() == 0, "clean stop")
        ok = True
    finally:
        left = setup.stop()
        if ok and left:
            raise Fail("the engine left host changes behind: %r" % left)


def docker(new_server, tar):
    def body(s, ref, kind):
        sid = create(s, ref)
        exercise(s, sid, "docker (%s)" % kind)
        check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
        desktop_env(s, ref, kind)
    on_engine(new_server, tar, TAG, body)


def test(new_server):
    if os.geteuid() != 0:
        raise Skip("needs root (mmdebstrap, sandboxes, a container engine)")
    tar = image(sys.argv[2])
    if sys.argv[3:] == ["--build-only"]:
        return
    native(new_server, tar)
    docker(new_server, tar)


if __name__ == "__main__":
    main(test)
